-- The tables of release 0.5.0 (migrations 1 to 8) that the first eight
-- migrations of later releases create otherwise: message_read_snapshots
-- sorted by message first, and five tables in granules of 8192 rows. As
-- the 0.5.0 binary created them (SHOW CREATE TABLE on ClickHouse 18.16);
-- the migrations, which create every table IF NOT EXISTS, then create the
-- rest as 0.5.0 did.
CREATE TABLE {db}.message_read_snapshots ( project_id Int64,  message_id Int64,  snapshot_at DateTime,  read_count UInt64,  total UInt64,  percent Float64,  fetched_at DateTime,  version UInt64,  schedule String) ENGINE = ReplacingMergeTree(version) PARTITION BY toYYYYMM(snapshot_at) ORDER BY (project_id, message_id, snapshot_at) SETTINGS index_granularity = 8192
;
CREATE TABLE {db}.project_read_gain_rollup ( project_id Int64,  snapshot_at DateTime,  gain_key String,  gain_prev_at DateTime,  gain_messages UInt64,  gain_new_messages UInt64,  gain_reads Int64,  gain_missed_ticks UInt64,  gain_schedule String,  gain_snap_messages UInt64,  gain_snap_reads UInt64,  gain_snap_total UInt64) ENGINE = MergeTree() PARTITION BY toYYYYMM(snapshot_at) ORDER BY (project_id, snapshot_at) SETTINGS index_granularity = 8192
;
CREATE TABLE {db}.project_read_snapshot_rollup ( project_id Int64,  snapshot_at DateTime,  version UInt64,  write_messages UInt64,  write_reads UInt64,  write_total UInt64) ENGINE = SummingMergeTree() PARTITION BY toYYYYMM(snapshot_at) ORDER BY (project_id, snapshot_at, version) SETTINGS index_granularity = 8192
;
CREATE TABLE {db}.snapshot_changes ( changed_at DateTime,  project_id Int64,  snapshot_at DateTime) ENGINE = MergeTree() PARTITION BY toYYYYMM(changed_at) ORDER BY (changed_at, project_id, snapshot_at) SETTINGS index_granularity = 8192
;
CREATE TABLE {db}.sync_runs ( run_id String,  schedule String,  trigger String,  snapshot_at DateTime,  started_at DateTime,  finished_at DateTime,  nft_total UInt64,  nft_ok UInt64,  nft_failed UInt64,  messages UInt64,  status String,  error String,  shard String) ENGINE = MergeTree() PARTITION BY toYYYYMM(started_at) ORDER BY (started_at, run_id) SETTINGS index_granularity = 8192
;
CREATE TABLE {db}.tick_changes ( changed_at DateTime,  schedule String,  tick DateTime) ENGINE = MergeTree() PARTITION BY toYYYYMM(changed_at) ORDER BY (changed_at, schedule, tick) SETTINGS index_granularity = 8192
;
