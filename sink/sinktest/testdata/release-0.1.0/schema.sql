-- The schema as readsync 0.1.0 (tag v0.1.0, commit 5013242) created it, copied from
-- that commit's sink/schema.go. Statements end with a line holding only ";"; {db} stands
-- for the database.
CREATE DATABASE IF NOT EXISTS `{db}`
;
CREATE TABLE IF NOT EXISTS `{db}`.`projects` (
    id Int64,
    nft String,
    name String,
    description String,
    logo String,
    type Int64,
    wallet_address String,
    create_at DateTime,
    raw String,
    fetched_at DateTime,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY id
;
CREATE TABLE IF NOT EXISTS `{db}`.`messages` (
    project_id Int64,
    id Int64,
    sender String,
    recv_group String,
    receivers Array(String),
    subject String,
    type Int64,
    is_all_subscribers UInt8,
    create_at DateTime,
    fetched_at DateTime,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, id)
;
CREATE TABLE IF NOT EXISTS `{db}`.`message_read_snapshots` (
    project_id Int64,
    message_id Int64,
    snapshot_at DateTime,
    read_count UInt64,
    total UInt64,
    percent Float64,
    fetched_at DateTime,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(snapshot_at)
ORDER BY (project_id, message_id, snapshot_at)
;
CREATE TABLE IF NOT EXISTS `{db}`.`sync_runs` (
    run_id String,
    schedule String,
    trigger String,
    snapshot_at DateTime,
    started_at DateTime,
    finished_at DateTime,
    nft_total UInt64,
    nft_ok UInt64,
    nft_failed UInt64,
    messages UInt64,
    status String,
    error String
) ENGINE = MergeTree()
PARTITION BY toYYYYMM(started_at)
ORDER BY (started_at, run_id)
;
CREATE VIEW IF NOT EXISTS `{db}`.`message_read_latest` AS
SELECT
    project_id,
    nft,
    project_name,
    message_id,
    subject,
    last_snapshot_at AS snapshot_at,
    last_read_count AS read_count,
    last_total AS total,
    last_percent AS percent
FROM
(
    SELECT project_id, message_id, subject, last_snapshot_at, last_read_count, last_total, last_percent
    FROM
    (
        SELECT
            project_id,
            message_id,
            max(snapshot_at) AS last_snapshot_at,
            argMax(read_count, (snapshot_at, version)) AS last_read_count,
            argMax(total, (snapshot_at, version)) AS last_total,
            argMax(percent, (snapshot_at, version)) AS last_percent
        FROM `{db}`.`message_read_snapshots`
        GROUP BY project_id, message_id
    )
    ANY LEFT JOIN
    (
        SELECT project_id, id AS message_id, subject
        FROM `{db}`.`messages` FINAL
    ) USING (project_id, message_id)
)
ANY LEFT JOIN
(
    SELECT id AS project_id, nft, name AS project_name
    FROM `{db}`.`projects` FINAL
) USING (project_id)
;
CREATE VIEW IF NOT EXISTS `{db}`.`project_read_daily` AS
SELECT
    day,
    project_id,
    nft,
    project_name,
    messages,
    reads,
    total,
    if(total = 0, 0, reads / total) AS read_rate
FROM
(
    SELECT day, project_id, count() AS messages, sum(day_read_count) AS reads, sum(day_total) AS total
    FROM
    (
        SELECT
            project_id,
            message_id,
            toDate(snapshot_at, 'UTC') AS day,
            argMax(read_count, (snapshot_at, version)) AS day_read_count,
            argMax(total, (snapshot_at, version)) AS day_total
        FROM `{db}`.`message_read_snapshots`
        GROUP BY project_id, message_id, day
    )
    GROUP BY day, project_id
)
ANY LEFT JOIN
(
    SELECT id AS project_id, nft, name AS project_name
    FROM `{db}`.`projects` FINAL
) USING (project_id)
;
