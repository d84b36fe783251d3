package schema

import "fmt"

// The second generation of the views: they read the rollups (rollups.go)
// rather than the whole history. Migration 2 creates them and migration 3
// writes them again in the form current releases accept; migration 7
// replaces the per-snapshot one (views_gains.go).

// rollupViews returns the dashboard views over the rollups (see
// rollups.go), as migration 2 creates them and migration 3 re-creates
// them; migration 7 replaces the last.
func rollupViews(d DDL) []view {
	return []view{
		{LatestView, latestFromRollup(d)},
		{DailyView, dailyFromRollup(d)},
		{SnapshotView, snapshotsFromRollup(d)},
	}
}

// latestFromRollup is message_read_latest over the latest rollup: each
// message's row, decoded.
func latestFromRollup(d DDL) string {
	decoded := fmt.Sprintf(`SELECT
    project_id,
    message_id,
    toDateTime(toUInt32(%s)) AS snapshot_at,
    %s AS read_count,
    %s AS total,
    reinterpretAsFloat64(substring(message_row, %d)) AS percent
FROM
(
    SELECT project_id, message_id, maxMerge(latest_row) AS message_row
    FROM %s
    GROUP BY project_id, message_id
)`, RowUInt64("message_row", RowSnapshotAt), RowUInt64("message_row", RowReadCount), RowUInt64("message_row", RowTotal), rowPercent, d.Table(LatestRollup))
	messages := "SELECT project_id, message_id, subject, snapshot_at, read_count, total, percent\nFROM " + withSubject(d, decoded)
	return "SELECT project_id, nft, project_name, message_id, subject, snapshot_at, read_count, total, percent\nFROM " + withProject(d, messages)
}

// dailyFromRollup is project_read_daily over the day rollup, which holds
// each project day's values as a refresh computed them (see dayrefresh.go).
func dailyFromRollup(d DDL) string {
	days := fmt.Sprintf(`SELECT project_id, day, tupleElement(day_values, 1) AS messages, tupleElement(day_values, 2) AS reads,
    tupleElement(day_values, 3) AS total
FROM
(
    SELECT project_id, day, argMaxMerge(day_state) AS day_values
    FROM %s
    GROUP BY project_id, day
)`, d.Table(DayRollup))
	return "SELECT day, project_id, nft, project_name, messages, reads, total, " + readRate + "\nFROM " + withProject(d, days)
}

// snapshotsFromRollup is project_read_snapshots as migrations 2 and 3
// create it: a project's read rate at a snapshot is that of its newest
// write for the snapshot, the highest version, summed by the snapshot
// rollup. Migration 7 replaces it with snapshotsFromGains.
func snapshotsFromRollup(d DDL) string {
	writes := fmt.Sprintf(`SELECT
    project_id,
    snapshot_at,
    argMax(write_messages, version) AS messages,
    argMax(write_reads, version) AS reads,
    argMax(write_total, version) AS total
FROM
(
    SELECT project_id, snapshot_at, version, sum(write_messages) AS write_messages,
        sum(write_reads) AS write_reads, sum(write_total) AS write_total
    FROM %s
    GROUP BY project_id, snapshot_at, version
)
GROUP BY project_id, snapshot_at`, d.Table(SnapshotRollup))
	return "SELECT snapshot_at, project_id, nft, project_name, messages, reads, total, " + readRate + "\nFROM " + withProject(d, writes)
}

// RollupViewsDDL writes the views over the rollups (views_rollups.go)
// again, as migrations 2 and 3 do.
func RollupViewsDDL(d DDL) []string {
	var stmts []string
	for _, v := range rollupViews(d) {
		stmts = append(stmts, d.replaceView(v)...)
	}
	return stmts
}
