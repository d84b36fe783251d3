package schema

import (
	"fmt"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
)

// Each name's health: every pass records the names it asked for and did
// not read in name_failures, a row per name and pass with the cause, and
// those it read in name_successes, a row per name and pass that the table
// merges down to each name's latest. The view name_health says, per
// schedule and name, when it was last read, when and why it last failed,
// and how many passes in a row have failed since.
//
// Both tables are ReplacingMergeTree, and the view takes a maximum or the
// distinct pass times: a row delivered twice (a spool entry replayed after
// its INSERT's answer was lost, on a server without deduplication tokens)
// counts once. A backfill records its names under the schedule ''.

// NameHealthView is the view of each name's health.
const NameHealthView = "name_health"

// nameHealthWindow is how far back name_health reads the failures: a name
// that no pass has asked for within it (removed from its list) leaves the
// failing set, and its failures are counted over it. A day bounds what the
// view reads to a day of failures, whatever the history stored.
const nameHealthWindow = "INTERVAL 1 DAY"

// streakPasses is how many of a schedule's passes back, at least,
// name_health counts a name's failures in a row over: the view reads the
// hours of the last day, and for a schedule whose streakPasses passes
// span longer (a pass every 22.5 minutes or less often), the hours of
// that span, so that an @daily schedule's name failing for a week counts
// 7. What it reads follows the passes, not the history kept: a row per
// failing name and hour of a day, or at most a row per pass.
const streakPasses = 64

// streakSpans is, per schedule with at least two cron passes recorded in
// sync_runs in the last 8 days whose last streakPasses passes span longer
// than a day, that span in seconds, from the passes' mean interval. A
// schedule it leaves out (faster, a backfill's empty one, one that did not run)
// counts over the day.
func streakSpans(d DDL) string {
	// The division is computed for a schedule of one pass too, before
	// HAVING leaves it out: its divisor is kept at 1 or more.
	return fmt.Sprintf(`SELECT schedule, toUInt32(%d * intDiv(toUInt32(max(snapshot_at)) - toUInt32(min(snapshot_at)), greatest(uniqExact(snapshot_at), 2) - 1)) AS span
FROM %s
WHERE started_at >= now() - INTERVAL 8 DAY AND trigger = 'cron'
GROUP BY schedule
HAVING uniqExact(snapshot_at) > 1 AND span > 86400`, streakPasses, d.Table(RunsTable.name))
}

// streakHours is the set of (schedule, UTC hour) that name_health reads
// before the day's hours: each slow schedule's hours from the one its span
// starts in. As a set of the rollup's first two key columns, the server
// reads only their granules.
func streakHours(d DDL) string {
	// range takes one argument on 18.16: the hours are the first one's
	// number plus 0, 1, … up to the day's first.
	first := "intDiv(toUInt32(now()) - span, 3600)"
	return fmt.Sprintf(`SELECT schedule, toDateTime((%[1]s + arrayJoin(range(toUInt32(intDiv(toUInt32(now() - %[2]s), 3600) - %[1]s)))) * 3600)
FROM
(
%[3]s
)`, first, nameHealthWindow, indent(streakSpans(d)))
}

// NameHealthReach is the query of how far back, in seconds, name_health
// reads the names' failures: a day, or the longest span of a slow
// schedule's last streakPasses passes. A repair computes that much again.
func NameHealthReach(n chconn.Names) string {
	return fmt.Sprintf("SELECT greatest(toUInt32(86400), max(span)) FROM (%s)", streakSpans(DDL{Names: n}))
}

var (
	// NameFailuresTable is name_failures: a row per name a pass asked
	// for and did not read.
	NameFailuresTable = &table[sink.NameFailure]{
		name: "name_failures",
		columns: []column[sink.NameFailure]{
			{"run_id", "String", func(f *sink.NameFailure) any { return f.RunID }},
			{"snapshot_at", "DateTime", func(f *sink.NameFailure) any { return f.SnapshotAt }},
			{"shard", "String", func(f *sink.NameFailure) any { return f.Shard }},
			{"nft", "String", func(f *sink.NameFailure) any { return f.NFT }},
			{"stage", "String", func(f *sink.NameFailure) any { return f.Stage }},
			{"kind", "String", func(f *sink.NameFailure) any { return f.Kind }},
			{"http_status", "UInt16", func(f *sink.NameFailure) any { return f.HTTPStatus }},
			{"attempts", "UInt32", func(f *sink.NameFailure) any { return f.Attempts }},
			{"error", "String", func(f *sink.NameFailure) any { return f.Error }},
		},
		batchColumns: []batchColumn{{"schedule", "String", func(b *sink.Batch) any { return b.Schedule }}},
		layout: layout{
			engine:      engine{"ReplacingMergeTree", ""},
			partitionBy: "toYYYYMM(snapshot_at)",
			orderBy:     "(schedule, nft, snapshot_at)",
			shardBy:     "nft",
		},
	}

	// NameSuccessesTable is name_successes: a row per name a pass read,
	// merged down to each name's latest. It is a table of current state,
	// not partitioned by month: what name_health reads of it, the latest
	// success of each failing name, is then a row per name whatever the
	// months stored (partitioned, it was a row per name and month, all of
	// them read); it holds a row per schedule and name ever read, and
	// never expires.
	NameSuccessesTable = &table[sink.NameSuccess]{
		name: "name_successes",
		columns: []column[sink.NameSuccess]{
			{"nft", "String", func(s *sink.NameSuccess) any { return s.NFT }},
			{"snapshot_at", "DateTime", func(s *sink.NameSuccess) any { return s.SnapshotAt }},
		},
		batchColumns: []batchColumn{{"schedule", "String", func(b *sink.Batch) any { return b.Schedule }}},
		layout: layout{
			engine:  engine{"ReplacingMergeTree", "snapshot_at"},
			orderBy: "(schedule, nft)",
			shardBy: "nft",
		},
	}
)

// nameHealthV10 is name_health's query as migration 10 created it, from
// the failures themselves: per schedule and name, its latest success (the
// epoch when none), its latest failure within the window with the cause,
// the distinct passes that failed within the window, and of those the
// ones after the latest success: the passes in a row that have failed, 0
// when the latest pass that asked succeeded. It read every failure of the
// day at every query (nameHealth replaces it).
func nameHealthV10(d DDL) string {
	failed := fmt.Sprintf("SELECT schedule, nft FROM %s WHERE snapshot_at >= now() - %s", d.Table(NameFailuresTable.name), nameHealthWindow)
	failures := fmt.Sprintf(`SELECT
    schedule,
    nft,
    max(snapshot_at) AS last_failure_at,
    argMax(kind, snapshot_at) AS last_error_kind,
    argMax(error, snapshot_at) AS last_error,
    argMax(http_status, snapshot_at) AS last_http_status,
    groupUniqArray(snapshot_at) AS failed_at
FROM %s
WHERE snapshot_at >= now() - %s
GROUP BY schedule, nft`, d.Table(NameFailuresTable.name), nameHealthWindow)
	return nameHealthOf(d, failures, failed, "length(failed_at)", "arrayCount(t -> t > last_success_at, failed_at)")
}

// nameHealthOf is name_health over failures, a row per schedule and name
// that failed within the window (last_failure_at, last_error_kind,
// last_error, last_http_status, and failed_at, the distinct times of the
// passes that failed), and failed, the schedules and names it holds;
// failures24h and afterSuccess count the failures of the window and those
// after the last success (last_success_at) from them.
func nameHealthOf(d DDL, failures, failed, failures24h, afterSuccess string) string {
	return fmt.Sprintf(`SELECT
    schedule,
    nft,
    last_success_at,
    last_failure_at,
    last_error_kind,
    last_error,
    last_http_status,
    toUInt64(%s) AS failures_24h,
    toUInt64(if(last_failure_at > last_success_at, %s, 0)) AS failing_passes
FROM %s
UNION ALL
%s`, failures24h, afterSuccess, anyLeftJoin(failures, successesWhere(d, "(schedule, nft) GLOBAL IN ("+failed+")"), "schedule, nft"), healthyNames(d, failed))
}

// successesWhere selects the latest success (last_success_at) of each
// schedule and name whose successes the condition where selects.
func successesWhere(d DDL, where string) string {
	return fmt.Sprintf(`SELECT schedule, nft, max(snapshot_at) AS last_success_at
FROM %s
WHERE %s
GROUP BY schedule, nft`, d.Table(NameSuccessesTable.name), where)
}

// healthyNames is name_health's half of the names that did not fail
// within the window, those failed does not select: each read from its
// latest success alone. A query for the failing names (failing_passes >
// 0) costs the failing half where the server prunes this one, whose
// failing_passes is a constant 0 (26.7 does, 18.16 does not).
func healthyNames(d DDL, failed string) string {
	return fmt.Sprintf(`SELECT
    schedule,
    nft,
    max(snapshot_at) AS last_success_at,
    toDateTime(0) AS last_failure_at,
    '' AS last_error_kind,
    '' AS last_error,
    toUInt16(0) AS last_http_status,
    toUInt64(0) AS failures_24h,
    toUInt64(0) AS failing_passes
FROM %s
WHERE (schedule, nft) GLOBAL NOT IN (%s)
GROUP BY schedule, nft`, d.Table(NameSuccessesTable.name), failed)
}

// NameHealthDDL is what migration 10 creates: the two tables and the view.
func NameHealthDDL(d DDL) []string {
	stmts := append(d.CreateTable(NameFailuresTable.Def()), d.CreateTable(NameSuccessesTable.Def())...)
	return append(stmts, d.CreateView(NameHealthView, nameHealthV10(d)))
}
