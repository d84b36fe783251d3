package clickhouse

import (
	"fmt"
	"strings"
)

// The views users query. They follow rules both tested servers share:
//
//   - One JOIN per SELECT, hence the nesting: 18.16 allows no more.
//   - Every joined subquery has an alias: current releases refuse one
//     without (joined_subquery_requires_alias, on by default). join is the
//     one place that writes a JOIN.
//   - An alias is never the name of a column the same SELECT reads: 18.16
//     substitutes an alias wherever its name appears, so argMax(read_count,
//     …) AS read_count would be cyclic there. Hence last_read_count and the
//     rollups' own column names.
//   - Columns are named, never *: over a JOIN … USING, 18.16 returns the
//     right side's key columns too.
//
// The small lookup tables are read with FINAL; the snapshot history never
// is.

// Names of the views.
const (
	latestView = "message_read_latest"
	dailyView  = "project_read_daily"
	// snapshotView is the view of read rate per project at each snapshot.
	snapshotView = "project_read_snapshots"
)

// anyLeftJoin returns the FROM clause that joins the subquery right to the
// subquery left by the columns using: each row of left with the first
// matching row of right, or defaults when none matches.
func anyLeftJoin(left, right, using string) string { return join("ANY LEFT", left, right, using) }

// join returns the FROM clause that joins the subquery right to the
// subquery left by the columns using, with the JOIN of kind (such as ANY
// LEFT or ALL INNER): the one place that writes a JOIN.
func join(kind, left, right, using string) string {
	return fmt.Sprintf("(\n%s\n) AS l\n%s JOIN\n(\n%s\n) AS r USING (%s)", indent(left), kind, indent(right), using)
}

// indent indents every line of q by four spaces.
func indent(q string) string {
	return "    " + strings.ReplaceAll(q, "\n", "\n    ")
}

// withProject returns the FROM clause that adds the project's nft and name
// to the rows of the subquery left, by project_id.
func withProject(d ddl, left string) string {
	right := fmt.Sprintf("SELECT id AS project_id, nft, name AS project_name%s\nFROM %s FINAL", d.FinalVersion(), d.Table(ProjectsTable.name))
	return anyLeftJoin(left, right, "project_id")
}

// withSubject returns the FROM clause that adds each message's subject to
// the rows of the subquery left, by project_id and message_id.
func withSubject(d ddl, left string) string {
	right := fmt.Sprintf("SELECT project_id, id AS message_id, subject%s\nFROM %s FINAL", d.FinalVersion(), d.Table(MessagesTable.name))
	return anyLeftJoin(left, right, "project_id, message_id")
}

// readRate is a view's read rate column: reads over total, 0 for none.
const readRate = "if(total = 0, 0, reads / total) AS read_rate"

// messageReadLatestV1 is the query of message_read_latest as migration 1
// creates it: argMax over (snapshot_at, version) of the whole history.
// Migration 2 replaces it with latestFromRollup.
func messageReadLatestV1(d ddl) string {
	latest := fmt.Sprintf(`SELECT
    project_id,
    message_id,
    max(snapshot_at) AS last_snapshot_at,
    argMax(read_count, (snapshot_at, version)) AS last_read_count,
    argMax(total, (snapshot_at, version)) AS last_total,
    argMax(percent, (snapshot_at, version)) AS last_percent
FROM %s
GROUP BY project_id, message_id`, d.Table(SnapshotsTable.name))
	messages := "SELECT project_id, message_id, subject, last_snapshot_at, last_read_count, last_total, last_percent\nFROM " + withSubject(d, latest)
	return `SELECT
    project_id,
    nft,
    project_name,
    message_id,
    subject,
    last_snapshot_at AS snapshot_at,
    last_read_count AS read_count,
    last_total AS total,
    last_percent AS percent
FROM ` + withProject(d, messages)
}

// projectReadDailyV1 is the query of project_read_daily as migration 1
// creates it. A day is a UTC day whatever the server's time zone, like
// snapshot_at itself. Each message counts with its last snapshot of the
// day, so a project's line does not depend on how many passes ran that
// day. Migration 2 replaces it with dailyFromRollup.
func projectReadDailyV1(d ddl) string {
	days := fmt.Sprintf(`SELECT day, project_id, count() AS messages, sum(day_read_count) AS reads, sum(day_total) AS total
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
GROUP BY day, project_id`, d.Table(SnapshotsTable.name))
	return "SELECT day, project_id, nft, project_name, messages, reads, total, " + readRate + "\nFROM " + withProject(d, days)
}

// view is a view's name and query.
type view struct{ name, query string }

// rollupViews returns the dashboard views over the rollups (see
// rollups.go), as migration 2 creates them and migration 3 re-creates
// them; migration 7 replaces the last.
func rollupViews(d ddl) []view {
	return []view{
		{latestView, latestFromRollup(d)},
		{dailyView, dailyFromRollup(d)},
		{snapshotView, snapshotsFromRollup(d)},
	}
}

// latestFromRollup is message_read_latest over the latest rollup: each
// message's row, decoded.
func latestFromRollup(d ddl) string {
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
)`, rowUInt64("message_row", rowSnapshotAt), rowUInt64("message_row", rowReadCount), rowUInt64("message_row", rowTotal), rowPercent, d.Table(latestRollup))
	messages := "SELECT project_id, message_id, subject, snapshot_at, read_count, total, percent\nFROM " + withSubject(d, decoded)
	return "SELECT project_id, nft, project_name, message_id, subject, snapshot_at, read_count, total, percent\nFROM " + withProject(d, messages)
}

// dailyFromRollup is project_read_daily over the day rollup, which holds
// each project day's values as a refresh computed them (see dayrefresh.go).
func dailyFromRollup(d ddl) string {
	days := fmt.Sprintf(`SELECT project_id, day, tupleElement(day_values, 1) AS messages, tupleElement(day_values, 2) AS reads,
    tupleElement(day_values, 3) AS total
FROM
(
    SELECT project_id, day, argMaxMerge(day_state) AS day_values
    FROM %s
    GROUP BY project_id, day
)`, d.Table(dayRollup))
	return "SELECT day, project_id, nft, project_name, messages, reads, total, " + readRate + "\nFROM " + withProject(d, days)
}

// snapshotsFromRollup is project_read_snapshots as migrations 2 and 3
// create it: a project's read rate at a snapshot is that of its newest
// write for the snapshot, the highest version, summed by the snapshot
// rollup. Migration 7 replaces it with snapshotsFromGains.
func snapshotsFromRollup(d ddl) string {
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
GROUP BY project_id, snapshot_at`, d.Table(snapshotRollup))
	return "SELECT snapshot_at, project_id, nft, project_name, messages, reads, total, " + readRate + "\nFROM " + withProject(d, writes)
}

// snapshotsFromGains is project_read_snapshots from migration 7 on: each
// project snapshot's newest write, as the refresh of its gains with the
// highest key saw it (see gains.go).
func snapshotsFromGains(d ddl) string {
	snaps := fmt.Sprintf(`SELECT
    project_id,
    snapshot_at,
    tupleElement(w, 1) AS messages,
    tupleElement(w, 2) AS reads,
    tupleElement(w, 3) AS total
FROM
(
    SELECT project_id, snapshot_at, argMax((gain_snap_messages, gain_snap_reads, gain_snap_total), gain_key) AS w
    FROM %s
    GROUP BY project_id, snapshot_at
)`, d.Table(gainsRollup))
	return "SELECT snapshot_at, project_id, nft, project_name, messages, reads, total, " + readRate + "\nFROM " + withProject(d, snaps)
}

// coverageView counts, per schedule and UTC day, the ticks due and how
// they fared, from the run records of sync_runs: readsync records every
// tick of a schedule, whether a pass ran (ok, partial, failed) or not
// (skipped: the previous pass still ran; missed: readsync was not
// running). In a sharded deployment each shard records its own; a tick
// counts as run when every shard that recorded it ran it, and as ok when
// every one finished ok. A run record written twice (a replay) counts
// once: ticks are told apart by their time.
const coverageView = "schedule_coverage"

func scheduleCoverage(d ddl) string {
	return fmt.Sprintf(`SELECT
    schedule,
    day,
    count() AS ticks_due,
    countIf(tick_ran = 1) AS ticks_run,
    countIf(tick_ok = 1) AS ticks_ok,
    countIf(tick_skipped = 1) AS ticks_skipped,
    countIf(tick_missed = 1) AS ticks_missed
FROM
(
    SELECT
        schedule,
        snapshot_at AS tick,
        toDate(snapshot_at, 'UTC') AS day,
        min(status IN ('ok', 'partial', 'failed')) AS tick_ran,
        min(status = 'ok') AS tick_ok,
        max(status = 'skipped') AS tick_skipped,
        max(status = 'missed') AS tick_missed
    FROM %s
    WHERE trigger = 'cron'
    GROUP BY schedule, tick, day
)
GROUP BY schedule, day`, d.Table(RunsTable.name))
}

// gainsPerSnapshot selects, per project and snapshot, the values of the
// refresh with the highest key (see gains.go), as the tuple g: previous
// snapshot time, messages, new messages, reads gained, missed ticks.
func gainsPerSnapshot(d ddl) string {
	return fmt.Sprintf(`SELECT
    project_id,
    snapshot_at,
    argMax((gain_prev_at, gain_messages, gain_new_messages, gain_reads, gain_missed_ticks), gain_key) AS g
FROM %s
GROUP BY project_id, snapshot_at`, d.Table(gainsRollup))
}

// projectReadGains is project_read_gains: per project and snapshot, the
// reads its messages gained since each one's previous snapshot, and
// whether the interval spans ticks that gave the project nothing.
func projectReadGains(d ddl) string {
	snaps := `SELECT
    project_id,
    snapshot_at,
    if(toUInt32(tupleElement(g, 1)) = 0, NULL, tupleElement(g, 1)) AS prev_snapshot_at,
    tupleElement(g, 2) AS messages,
    tupleElement(g, 3) AS new_messages,
    tupleElement(g, 4) AS reads_gained,
    tupleElement(g, 5) AS missed_ticks
FROM
(
` + indent(gainsPerSnapshot(d)) + `
)`
	return "SELECT snapshot_at, project_id, nft, project_name, prev_snapshot_at, messages, new_messages, reads_gained, missed_ticks\nFROM " + withProject(d, snaps)
}

// projectReadDailyGains is project_read_daily_gains: the gains of a
// project's snapshots summed per UTC day, from the day gains rollup (see
// gaindays.go). An interval counts on the day of the snapshot that ends
// it, its missed ticks too.
func projectReadDailyGains(d ddl) string {
	days := fmt.Sprintf(`SELECT
    project_id,
    day,
    tupleElement(v, 1) AS snapshots,
    tupleElement(v, 2) AS new_messages,
    tupleElement(v, 3) AS reads_gained,
    tupleElement(v, 4) AS missed_ticks
FROM
(
    SELECT project_id, day, argMaxMerge(day_gain_state) AS v
    FROM %s
    GROUP BY project_id, day
)`, d.Table(dayGainsRollup))
	return "SELECT day, project_id, nft, project_name, snapshots, new_messages, reads_gained, missed_ticks\nFROM " + withProject(d, days)
}

// gainsViews are the views of reads gained, as migration 6 creates them.
func gainsViews(d ddl) []view {
	return []view{{gainsView, projectReadGains(d)}, {dailyGainsView, projectReadDailyGains(d)}}
}

// Views are the names of the views users query, the dashboards' sources,
// in the order readsync reports on them.
func Views() []string {
	return []string{latestView, dailyView, snapshotView, gainsView, dailyGainsView, coverageView}
}
