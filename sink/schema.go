package sink

import "fmt"

// Column lists of the INSERTs, in the order Write appends values.
const (
	projectColumns  = "id, nft, name, description, logo, type, wallet_address, create_at, raw, fetched_at, version"
	messageColumns  = "project_id, id, sender, recv_group, receivers, subject, type, is_all_subscribers, create_at, fetched_at, version"
	snapshotColumns = "project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version"
	runColumns      = "run_id, schedule, trigger, snapshot_at, started_at, finished_at, nft_total, nft_ok, nft_failed, messages, status, error"
)

type migration struct {
	name string
	sql  string
}

// migrations returns the DDL in the order it must run. Every statement is
// idempotent and uses only what ClickHouse 18.16 and current releases share:
// no DateTime64, Bool, LowCardinality, TTL or window functions.
//
// The version columns are UInt64 nanoseconds: a DateTime version would tie
// when two passes write one key within a second, and ReplacingMergeTree
// would then keep either row.
func migrations(db string) []migration {
	q := func(t string) string { return quoteIdent(db) + "." + quoteIdent(t) }
	return []migration{
		{"create database", fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s", quoteIdent(db))},
		{"create projects", fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
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
ORDER BY id`, q("projects"))},
		{"create messages", fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
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
ORDER BY (project_id, id)`, q("messages"))},
		{"create message_read_snapshots", fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
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
ORDER BY (project_id, message_id, snapshot_at)`, q("message_read_snapshots"))},
		{"create sync_runs", fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
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
ORDER BY (started_at, run_id)`, q("sync_runs"))},
		// The views below are for BI tools. They follow the rules of 18.16,
		// which allows one JOIN per SELECT (hence the nesting) and
		// substitutes an alias wherever its name appears in the same
		// SELECT (hence last_read_count, not read_count, next to
		// argMax(read_count, ...)). Snapshots are deduplicated with
		// argMax over (snapshot_at, version), which avoids FINAL on the
		// largest table; the small lookup tables use FINAL. IF NOT EXISTS
		// keeps an existing view: changing one needs a DROP migration.
		{"create message_read_latest", fmt.Sprintf(`CREATE VIEW IF NOT EXISTS %s AS
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
        FROM %s
        GROUP BY project_id, message_id
    )
    ANY LEFT JOIN
    (
        SELECT project_id, id AS message_id, subject
        FROM %s FINAL
    ) USING (project_id, message_id)
)
ANY LEFT JOIN
(
    SELECT id AS project_id, nft, name AS project_name
    FROM %s FINAL
) USING (project_id)`, q("message_read_latest"), q("message_read_snapshots"), q("messages"), q("projects"))},
		// A day is a UTC day whatever the server's time zone, like
		// snapshot_at itself. Each message counts with its last snapshot
		// of the day, so a project's line does not depend on how many
		// passes ran that day.
		{"create project_read_daily", fmt.Sprintf(`CREATE VIEW IF NOT EXISTS %s AS
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
        FROM %s
        GROUP BY project_id, message_id, day
    )
    GROUP BY day, project_id
)
ANY LEFT JOIN
(
    SELECT id AS project_id, nft, name AS project_name
    FROM %s FINAL
) USING (project_id)`, q("project_read_daily"), q("message_read_snapshots"), q("projects"))},
	}
}
