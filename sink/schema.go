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
	}
}
