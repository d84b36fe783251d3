package schema

import (
	"fmt"

	"github.com/readsync/readsync/sink/chconn"
)

// Each name's failures by the hour: name_health read a day of failures
// at every query, which at a one-minute cadence and a thousand failing
// names is 1.44 million rows, error texts included. The rollup
// name_failure_hour_rollup holds, once merged, a row per schedule, name,
// UTC hour and second of the minute that the name failed at: a bitmap of
// the minutes of the hour it failed in, and its last failure. A time is
// its hour, its minute and its second, so the bitmaps count the distinct
// passes that failed exactly, without a set of times to merge: a cron
// schedule's passes fall on second 0, one row an hour; an @every
// schedule's on one second while it runs, which a restart may change; a
// backfill's anywhere. A materialized view fills it from every INSERT
// into name_failures, so it is written with the pass's rows, spooled and
// replayed with them.
//
// Both states are idempotent (a bitwise or, a maximum), so a failure
// delivered twice, or read by the migration's fold and the materialized
// view both, counts once. The last failure is kept as one String
// (FailureRow), the greatest of them: of two failures of a name at the
// same pass time, the same one whatever the order they arrived in.

// NameFailureHours is the rollup of each name's failures by the hour.
const NameFailureHours = "name_failure_hour_rollup"

// FailureRow encodes a failure as one String that sorts by its time,
// then its HTTP status, then its kind (by length, then bytes), then its
// error: the time, the status and the kind's length in bigEndian form,
// then the kind and the error. A maximum of a String merges several times
// faster than one of a tuple with strings (10 ms against 35 for 25 000
// states on 26.7), as SnapshotRow does for the snapshot rows. A kind is
// one of a few short words (sync's taxonomy); one longer than 255 bytes
// would be cut there.
var FailureRow = "concat(" + bigEndian("toUInt64(toUInt32(snapshot_at))") + ", " + bigEndian("toUInt64(http_status)") + ", " +
	bigEndian("toUInt64(least(length(kind), 255))") + ", substring(kind, 1, 255), error)"

// Where FailureRow's fields begin; the kind begins at failureKind and
// the error right after it.
const (
	failureAt      = 1
	failureStatus  = 9
	failureKindLen = 17
	failureKind    = 25
)

// nameFailureHoursTable is sorted by the schedule, then the hour: the
// view reads the last day's hours of every schedule, and the longer spans
// of the slow ones (streakSpans), each a contiguous range, whatever the
// history kept. It is sharded by name like name_failures, whose local
// table fills it on each shard.
var nameFailureHoursTable = rollupTable{
	TableDef: TableDef{name: NameFailureHours, columns: []ColumnDef{
		{"schedule", "String"}, {"nft", "String"}, {"hour", "DateTime"}, {"at_second", "UInt8"},
		{"minute_bits", "AggregateFunction(groupBitOr, UInt64)"},
		{"last_failure", "AggregateFunction(max, String)"},
	}, layout: layout{
		engine:      engine{name: "AggregatingMergeTree"},
		partitionBy: "toYYYYMM(hour)",
		orderBy:     "(schedule, hour, nft, at_second)",
		shardBy:     "nft",
	}},
	// From Unix seconds, as HourOf: the hour, minute and second are
	// UTC's whatever the server's time zone.
	fill: `SELECT schedule, nft, ` + HourOf + ` AS hour, toUInt8(toUInt32(snapshot_at) % 60) AS at_second,
    groupBitOrState(bitShiftLeft(toUInt64(1), intDiv(toUInt32(snapshot_at) % 3600, 60))) AS minute_bits,
    maxState(` + FailureRow + `) AS last_failure
FROM {from} {where}
GROUP BY schedule, nft, hour, at_second`,
}

// nameHealthHoursFrom is the first hour the view reads: the UTC hour the
// window starts in.
const nameHealthHoursFrom = "toDateTime(intDiv(toUInt32(now() - " + nameHealthWindow + "), 3600) * 3600)"

// failedAfter counts the failures a row of the rollup (its hour,
// at_second and bits, the merged minute_bits) records after the Unix
// time x: its minutes m with hour + 60m + at_second > x, those from k on,
// where k is 0 when the row's first possible time is after x, and 60
// (none) when x is past the hour.
func failedAfter(x string) string {
	k := fmt.Sprintf("toUInt8(multiIf(toInt64(%[1]s) < toInt64(hour) + at_second, 0, least(60, intDiv(toInt64(%[1]s) - toInt64(hour) - at_second, 60) + 1)))", x)
	return popCount("bitAnd(bits, bitShiftLeft(toUInt64(18446744073709551615), " + k + "))")
}

// popCount counts the bits set in the UInt64 expression x. 18.16 has no
// bitCount, and the length of bitmaskToArray, which it has, builds an
// array a row (20 ms more for a day of a thousand names failing every
// minute): this is the count by adding neighbouring bits in pairs, then
// fours, then bytes, whose sum the multiplication gathers in the top byte.
// minus gives an Int64, and a product can pass 2^63: each is taken back
// to UInt64, whose arithmetic wraps, before a shift.
func popCount(x string) string {
	pairs := fmt.Sprintf("toUInt64(minus(%[1]s, bitAnd(bitShiftRight(%[1]s, 1), 6148914691236517205)))", x)                       // 0x5555…
	fours := fmt.Sprintf("plus(bitAnd(%[1]s, 3689348814741910323), bitAnd(bitShiftRight(%[1]s, 2), 3689348814741910323))", pairs) // 0x3333…
	bytes := fmt.Sprintf("bitAnd(plus(%[1]s, bitShiftRight(%[1]s, 4)), 1085102592571150095)", fours)                              // 0x0f0f…
	return fmt.Sprintf("bitShiftRight(toUInt64(multiply(%s, 72340172838076673)), 56)", bytes)                                     // 0x0101…
}

// nameHealth is name_health's query since migration 14: nameHealthV10's
// columns from the rollup's rows of the hours the window touches, each
// joined with its name's latest success. A failing name's last failure is
// the greatest of its rows'; its failures are counted from the bitmaps:
// failures_24h after the window's start, failing_passes after that
// success in the hours read: those of the day (from the start of the hour
// a day ago), and for a slow schedule those of its last streakPasses
// passes (streakHours). The rollup is read
// once for the failing names, and once more for the names whose successes
// to look up: by name alone, which 26.7 and 18.16 both look up faster
// than a (schedule, name) pair (11 ms against 22); the join keeps the
// schedule's.
func nameHealth(d DDL) string {
	rollup := d.Table(NameFailureHours)
	since := "toUInt32(now() - " + nameHealthWindow + ")"
	failed := fmt.Sprintf(`SELECT schedule, nft
FROM %s
WHERE hour >= %s
GROUP BY schedule, nft
HAVING %s >= %s`, rollup, nameHealthHoursFrom, RowUInt64("maxMerge(last_failure)", failureAt), since)
	// The hours of the day, and before them those of the spans of the
	// schedules whose last streakPasses passes span longer, each a range
	// of the sort key, (schedule, hour, …): the latter only for their
	// bitmaps, as a failing name's last failure is in the day. Not reading
	// the failures' texts there halves what the span costs.
	rows := fmt.Sprintf(`SELECT schedule, nft, hour, at_second, groupBitOrMerge(minute_bits) AS bits, maxMerge(last_failure) AS hour_last
FROM %[1]s
WHERE hour >= %[2]s
GROUP BY schedule, nft, hour, at_second
UNION ALL
SELECT schedule, nft, hour, at_second, groupBitOrMerge(minute_bits) AS bits, '' AS hour_last
FROM %[1]s
WHERE (schedule, hour) %[4]s (%[3]s)
GROUP BY schedule, nft, hour, at_second`, rollup, nameHealthHoursFrom, streakHours(d), d.in())
	successes := successesWhere(d, fmt.Sprintf("nft %s (SELECT nft FROM %s WHERE hour >= %s)", d.in(), rollup, nameHealthHoursFrom))
	// A failure counts in failures_24h when after the second before the
	// window's start, and in the passes in a row when after the last
	// success, in any hour read.
	failing := fmt.Sprintf(`SELECT
    schedule,
    nft,
    any(last_success_at) AS succeeded_at,
    max(hour_last) AS last_row,
    toUInt64(sum(%s)) AS failures_24h,
    toUInt64(sum(%s)) AS after_success
FROM %s
GROUP BY schedule, nft
HAVING %s >= %s`, failedAfter(since+" - 1"), failedAfter("toUInt32(last_success_at)"),
		anyLeftJoin(rows, successes, "schedule, nft"), RowUInt64("last_row", failureAt), since)
	kindLen := RowUInt64("last_row", failureKindLen)
	return fmt.Sprintf(`SELECT
    schedule,
    nft,
    succeeded_at AS last_success_at,
    toDateTime(%s) AS last_failure_at,
    substring(last_row, %d, %s) AS last_error_kind,
    substring(last_row, %d + %s) AS last_error,
    toUInt16(%s) AS last_http_status,
    failures_24h,
    toUInt64(if(last_failure_at > last_success_at, after_success, 0)) AS failing_passes
FROM
(
%s
)
UNION ALL
%s`, RowUInt64("last_row", failureAt), failureKind, kindLen, failureKind, kindLen, RowUInt64("last_row", failureStatus),
		indent(failing), healthyNames(d, failed))
}

// NameFailureHoursDDL is what migration 14 creates: the rollup, the
// materialized view that fills it from name_failures on each host, and
// name_health over it.
func NameFailureHoursDDL(d DDL) []string {
	stmts := d.CreateTable(nameFailureHoursTable.TableDef)
	stmts = append(stmts, fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS\n%s",
		d.Table(NameFailureHours+"_mv"), d.OnCluster(), d.Local(NameFailureHours),
		nameFailureHoursTable.selectFrom(d.Local(NameFailuresTable.name), "")))
	return append(stmts, d.replaceView(view{NameHealthView, nameHealth(d)})...)
}

// NameHealthFromFailures is name_health computed from name_failures
// itself, with sets of times rather than bitmaps, and FailureRow's order
// for the last failure as a tuple: the brute force --verify holds the view
// to, at the same instant when both are read by one query.
func NameHealthFromFailures(n chconn.Names) string {
	d := DDL{Names: n}
	failures := d.Table(NameFailuresTable.name)
	failed := fmt.Sprintf("SELECT schedule, nft FROM %s WHERE snapshot_at >= now() - %s", failures, nameHealthWindow)
	// The failures of the hours the view reads; the first condition, on
	// the partition key's column, skips the months before them.
	hours := fmt.Sprintf(`snapshot_at >= toDateTime(intDiv(toUInt32(now()) - (%s), 3600) * 3600)
        AND (toDateTime(intDiv(toUInt32(snapshot_at), 3600) * 3600) >= %s
            OR (schedule, toDateTime(intDiv(toUInt32(snapshot_at), 3600) * 3600)) GLOBAL IN (%s))`,
		NameHealthReach(n), nameHealthHoursFrom, streakHours(d))
	return nameHealthOf(d, fmt.Sprintf(`SELECT
    schedule,
    nft,
    tupleElement(last, 1) AS last_failure_at,
    tupleElement(last, 4) AS last_error_kind,
    tupleElement(last, 5) AS last_error,
    tupleElement(last, 2) AS last_http_status,
    failed_at
FROM
(
    SELECT schedule, nft, max((snapshot_at, http_status, least(length(kind), 255), substring(kind, 1, 255), error)) AS last,
        groupUniqArray(snapshot_at) AS failed_at
    FROM %s
    WHERE %s
    GROUP BY schedule, nft
    HAVING max(snapshot_at) >= now() - %s
)`, failures, hours, nameHealthWindow), failed,
		"arrayCount(t -> t >= now() - "+nameHealthWindow+", failed_at)", "arrayCount(t -> t > last_success_at, failed_at)")
}

// NameFailureHoursRefill is the INSERT that computes the rollup's hours
// again from name_failures' rows that where (a WHERE clause) selects:
// what --repair runs after deleting those hours.
func NameFailureHoursRefill(n chconn.Names, where string) string {
	d := DDL{Names: n}
	return fmt.Sprintf("INSERT INTO %s %s", d.Table(NameFailureHours), nameFailureHoursTable.selectFrom(d.Table(NameFailuresTable.name), where))
}
