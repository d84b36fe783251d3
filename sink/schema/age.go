package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/readsync/readsync/sink/chconn"
)

// Reads on the message's own clock: how far a message was read at each
// whole hour of its age (hours since its create_at), whatever the day it
// was sent. Every other view is indexed by wall-clock time.
//
// The age rollup keeps, per message and age bucket, the last snapshot of
// the bucket: bucket h holds the snapshots taken after create_at + the
// previous bucket's age and at or before create_at + h hours. The buckets
// are the whole hours 0 to 72, then every 24 hours (96, 120, …); a
// snapshot at or before create_at falls in bucket 0. The row of age h in
// message_read_by_age is then the last bucket at or before h: the last
// snapshot taken at or before create_at + h hours, carried forward,
// never interpolated. The existing hourly rollup cannot give that: it
// keeps the last snapshot of each UTC hour, and create_at + h falls
// inside a UTC hour unless the message was created on the hour.
//
// create_at is not in the snapshot rows, so no materialized view can
// fill the rollup without reading the messages table at every INSERT:
// the write that inserts the snapshots fills it from the rows it holds,
// sent as external data (AgeFill), which costs no read of a table; the
// reconcile and --repair compute a project's rows again from the stored
// history (AgeRefill), as migration 16 folds the history written before
// (AgeFold).
//
// The rollup is kept for the daily retention: its rows are few (73 and
// one a day per message), and a curve is read from its start.

// Names of the age rollup and its views.
const (
	AgeRollup = "message_read_age_rollup"
	// ByAgeView is the view of each message's reads at each age.
	ByAgeView = "message_read_by_age"
	// SpeedView is the view of how fast each message was read.
	SpeedView = "message_read_speed"
	// ProjectByAgeView is the view of a project's usual reach at each age.
	ProjectByAgeView = "project_read_by_age"
)

// HourlyAges is the age up to which the buckets are an hour wide; past
// it they are a day wide.
const HourlyAges = 72

// AgeOf is the age bucket, in whole hours, of a row with the DateTime
// columns snapshot_at and create_at: the first of 0, 1, …, 72, 96, 120,
// … at or after the snapshot's age.
var AgeOf = strings.NewReplacer("{h}", "intDiv(toUInt32(snapshot_at) - toUInt32(create_at) + 3599, 3600)", "{last}", strconv.Itoa(HourlyAges)).Replace(`toUInt32(multiIf(
    toInt64(toUInt32(snapshot_at)) <= toInt64(toUInt32(create_at)), 0,
    {h} <= {last}, {h},
    {last} + 24 * intDiv({h} - {last} + 23, 24)))`)

// ageRollupTable holds, once merged, a row per message and age bucket:
// the bucket's last snapshot (age_row, a SnapshotRow) and its first
// snapshot time (age_first, what tells a message's first-seen age).
// age_at is create_at + age_hours: the time the row describes, by whose
// month it is partitioned and expires.
var ageRollupTable = rollupTable{
	TableDef: TableDef{name: AgeRollup, columns: []ColumnDef{
		{"project_id", "Int64"}, {"message_id", "Int64"}, {"age_hours", "UInt32"}, {"age_at", "DateTime"},
		{"age_row", "AggregateFunction(max, String)"}, {"age_first", "AggregateFunction(min, DateTime)"},
	}, layout: layout{
		engine:      engine{name: "AggregatingMergeTree"},
		partitionBy: "toYYYYMM(age_at)",
		orderBy:     "(project_id, message_id, age_hours, age_at)",
		shardBy:     "project_id",
		granularity: FineGranularity,
	}},
	fill: `SELECT
    project_id,
    message_id,
    ` + strings.ReplaceAll(AgeOf, "\n", "\n    ") + ` AS age_hours,
    toDateTime(toUInt32(create_at) + age_hours * 3600) AS age_at,
    maxState(` + SnapshotRow + `) AS age_row,
    minState(snapshot_at) AS age_first
FROM {from} {where}
GROUP BY project_id, message_id, age_hours, age_at`,
}

// AgeExtColumns are the columns, names and types alternating, of the
// external table AgeFill reads: a write's snapshot rows with their
// message's create_at.
var AgeExtColumns = []string{
	"project_id", "Int64", "message_id", "Int64", "create_at", "DateTime", "snapshot_at", "DateTime",
	"version", "UInt64", "read_count", "UInt64", "total", "UInt64", "percent", "Float64",
}

// AgeFill is the INSERT that adds the snapshot rows of the external
// table ext (AgeExtColumns) to the age rollup.
func AgeFill(n chconn.Names, ext string) string {
	return fmt.Sprintf("INSERT INTO %s (project_id, message_id, age_hours, age_at, age_row, age_first)\n%s",
		n.Table(AgeRollup), ageRollupTable.selectFrom(ext, ""))
}

// AgeFold is the INSERT that adds to the age rollup the snapshot rows
// of the month (YYYYMM) of the projects that the condition projects (on
// project_id) selects: what fills the rollup from the history written
// before it.
func AgeFold(n chconn.Names, month, projects string) string {
	return AgeRefill(n, "toYYYYMM(snapshot_at) = "+month+" AND "+projects, projects)
}

// AgeRefill is the INSERT that adds to the age rollup the snapshot rows
// that the condition snapshots selects, each with the create_at of its
// message, of those that the condition messages (on the messages table's
// project_id) selects. Messages whose create_at is unusable (stored as
// the Unix epoch) have no age.
func AgeRefill(n chconn.Names, snapshots, messages string) string {
	d := DDL{Names: n}
	snaps := fmt.Sprintf("SELECT project_id, message_id, snapshot_at, version, read_count, total, percent\nFROM %s\nWHERE %s",
		d.Table(SnapshotsTable.name), snapshots)
	// The version a FINAL read through a Distributed table selects
	// (FinalVersion) stays inside: the snapshots have a column of that
	// name.
	created := fmt.Sprintf("SELECT project_id, message_id, create_at\nFROM\n(\n    SELECT project_id, id AS message_id, create_at%s\n    FROM %s FINAL\n    WHERE toUInt32(create_at) > 0 AND %s\n)",
		d.FinalVersion(), d.Table(MessagesTable.name), messages)
	from := "(\nSELECT project_id, message_id, create_at, snapshot_at, version, read_count, total, percent\nFROM " +
		Join("ALL INNER", snaps, created, "project_id, message_id") + "\n)"
	return fmt.Sprintf("INSERT INTO %s (project_id, message_id, age_hours, age_at, age_row, age_first)\n%s",
		d.Table(AgeRollup), ageRollupTable.selectFrom(from, ""))
}

// ageCurves is the subquery of a row per message: its create_at, the age
// of its first snapshot, and its age buckets (ages, ascending) with the
// last snapshot of each (rows, in the same order).
func ageCurves(d DDL) string { return ageCurvesOf(d, "", "") }

// ageCurvesOf is ageCurves over the age rollup's rows that the WHERE
// clause where selects (empty: all), with the columns extra (empty, or
// starting with a comma) computed over each message's buckets
// (bucket_row, bucket_first, bucket_created).
func ageCurvesOf(d DDL, where, extra string) string {
	if where != "" {
		where = "\n    " + where
	}
	return fmt.Sprintf(`SELECT
    project_id,
    message_id,
    toDateTime(max(bucket_created)) AS create_at,
    toUInt32(intDiv(greatest(toInt64(toUInt32(min(bucket_first))) - toInt64(max(bucket_created)), 0), 3600)) AS first_seen_age_hours,
    arraySort(groupArray(bucket)) AS ages,
    arraySort((r, a) -> a, groupArray(bucket_row), groupArray(bucket)) AS rows%s
FROM
(
    SELECT
        project_id,
        message_id,
        age_hours AS bucket,
        max(toUInt32(age_at) - age_hours * 3600) AS bucket_created,
        maxMerge(age_row) AS bucket_row,
        minMerge(age_first) AS bucket_first
    FROM %s%s
    GROUP BY project_id, message_id, age_hours
)
GROUP BY project_id, message_id`, extra, d.Table(AgeRollup), where)
}

// messageReadByAge is message_read_by_age: per message and age on the
// grid, from its first bucket to the bucket of its latest snapshot, the
// last snapshot at or before create_at + age_hours. A message has no row
// before its first snapshot's bucket (first_seen_age_hours says when it
// was first seen), nor past its latest snapshot's, of which the
// snapshots say nothing.
func messageReadByAge(d DDL) string {
	// Each bucket's row is copied to the ages on the grid from the
	// bucket's up to the next bucket's (the latest's: to itself), two
	// ARRAY JOINs deep, so that a row of the result carries its own
	// snapshot row only: one ARRAY JOIN over the grid, each row picking
	// from the message's array of rows, would copy that array to every
	// age, memory in the square of the ages (32 GiB asked of 18.16 at
	// 100 000 messages), and 18.16 has no nested lambda to pick first.
	next := fmt.Sprintf("toUInt32(if(ages[length(ages)] < %[1]d, ages[length(ages)] + 1, ages[length(ages)] + 24))", HourlyAges)
	curve := fmt.Sprintf(`SELECT
    project_id,
    message_id,
    toUInt32(if(%[1]s + j <= %[2]d, %[1]s + j, %[2]d + (%[1]s + j - %[2]d) * 24)) AS age_hours,
    create_at,
    first_seen_age_hours,
    age_row
FROM
(
    SELECT project_id, message_id, create_at, first_seen_age_hours, bucket_age, age_row, bucket_next
    FROM
    (
%[5]s
    )
    ARRAY JOIN ages AS bucket_age, rows AS age_row, arrayPushBack(arrayPopFront(ages), %[4]s) AS bucket_next
)
ARRAY JOIN range(toUInt32(%[3]s - %[1]s)) AS j`, gridIndex("bucket_age"), HourlyAges, gridIndex("bucket_next"), next, indent(indent(ageCurves(d))))
	return fmt.Sprintf(`SELECT
    project_id,
    message_id,
    age_hours,
    toDateTime(toUInt32(%s)) AS snapshot_at,
    %s AS reads,
    %s AS total,
    %s,
    create_at,
    first_seen_age_hours
FROM
(
%s
)`, RowUInt64("age_row", RowSnapshotAt), RowUInt64("age_row", RowReadCount), RowUInt64("age_row", RowTotal), readRate, indent(curve))
}

// gridIndex is the position on the grid of ages (0, 1, …, 72, 96, …) of
// the age a, which is on it.
func gridIndex(a string) string {
	return fmt.Sprintf("if(%[1]s <= %[2]d, %[1]s, %[2]d + intDiv(%[1]s - %[2]d, 24))", a, HourlyAges)
}

// readsAt is the reads at age h of a message's curve (ages, reads_by),
// NULL where it has no row at h: first seen later, or not seen that old.
func readsAt(h int) string {
	return fmt.Sprintf("if(ages[1] <= %[1]d AND ages[length(ages)] >= %[1]d, reads_by[arrayCount(a -> a <= %[1]d, ages)], NULL)", h)
}

// reachedAfter is the bound, in hours of age, of when a message's reads
// reached a share of its latest (at least half: r ≥ ⌈latest / 2⌉, written
// latest - ⌊latest / 2⌋, which no count near the top of UInt64 overflows): max is the first age whose reads are at
// or above it, min the age before on the grid, whose reads are below it
// (NULL when the curve starts at or above it); both NULL when it has no
// reads. cond is the condition on r, an age's reads, and latest_reads.
func reachedAfter(name, cond string) string {
	idx := fmt.Sprintf("arrayFirstIndex(r -> %s, reads_by)", cond)
	return fmt.Sprintf(`if(latest_reads = 0 OR %[1]s <= 1, NULL, toUInt32(if(ages[%[1]s] <= %[3]d, ages[%[1]s] - 1, ages[%[1]s] - 24))) AS %[2]s_after_hours_min,
    if(latest_reads = 0, NULL, ages[%[1]s]) AS %[2]s_after_hours_max`, idx, name, HourlyAges)
}

// messageReadSpeedV16 is message_read_speed as migration 16 created it:
// every message's speed values (speedValues) computed from the age
// rollup at each query, with its project's names and its subject.
// Migration 17 writes the view again over the speed rollup (speed.go);
// the values it stores are these.
func messageReadSpeedV16(d DDL) string {
	return speedNamed(d, speedValues(d, "", false))
}

// speedNamed adds to the rows of the subquery speeds, with the columns
// speedColumns, each message's project's names and its subject, in the
// columns of message_read_speed.
func speedNamed(d DDL, speeds string) string {
	messages := "SELECT " + speedColumns + ", subject\nFROM " + withSubject(d, speeds)
	return "SELECT " + strings.Replace(speedColumns, "project_id, ", "project_id, nft, project_name, ", 1) + ", subject\nFROM " + withProject(d, messages)
}

// speedColumns are the columns of a message's speed values, as
// speedValues computes them and the speed rollup stores them.
const speedColumns = `project_id, message_id, create_at, first_seen_age_hours, reads_1h, reads_6h, reads_24h, reads_72h, reads_7d, latest_reads,
    share_24h, half_after_hours_min, half_after_hours_max, nine_tenths_after_hours_min, nine_tenths_after_hours_max`

// speedValues is the subquery of message_read_speed's values per message,
// over the age rollup's rows that the WHERE clause where selects (empty:
// all; it must select a message's every row, or its values are those of
// part of its curve): its reads at 1, 6, 24 and 72 hours and 7 days of
// age where its curve has them, the share of its latest reads it had at
// 24 hours, and when it reached half and nine tenths of them
// (reachedAfter). stored adds the speed rollup's other columns
// (SpeedTable): version, the highest version of the snapshots its curve
// holds, and what a row carries for the next write (speed.go).
func speedValues(d DDL, where string, stored bool) string {
	extra, inner, carried := "", "", ""
	if stored {
		extra = ",\n    max(" + RowUInt64("bucket_row", RowVersion) + ") AS version"
		inner = fmt.Sprintf(`,
        version,
        ages[1] AS first_age_hours,
        ages[length(ages)] AS latest_age_hours,
        toDateTime(toUInt32(%s)) AS latest_at,
        %s AS latest_version,
        arrayFirstIndex(r -> r >= latest_reads - intDiv(latest_reads, 2), reads_by) AS half_idx,
        arrayFirstIndex(r -> r >= latest_reads - intDiv(latest_reads, 10), reads_by) AS nine_tenths_idx`,
			RowUInt64("rows[length(rows)]", RowSnapshotAt), RowUInt64("rows[length(rows)]", RowVersion))
		carried = ",\n    version,\n    first_age_hours,\n    latest_age_hours,\n    latest_at,\n    latest_version,\n    " +
			shareCarried("half") + ",\n    " + shareCarried("nine_tenths")
	}
	return fmt.Sprintf(`SELECT
    project_id,
    message_id,
    create_at,
    first_seen_age_hours,
    %[1]s AS reads_1h,
    %[2]s AS reads_6h,
    %[3]s AS reads_24h,
    %[4]s AS reads_72h,
    %[5]s AS reads_7d,
    latest_reads,
    if(latest_reads = 0, NULL, reads_24h / latest_reads) AS share_24h,
    %[6]s,
    %[7]s%[10]s
FROM
(
    SELECT
        project_id,
        message_id,
        create_at,
        first_seen_age_hours,
        ages,
        arrayMap(r -> %[8]s, rows) AS reads_by,
        reads_by[length(reads_by)] AS latest_reads%[11]s
    FROM
    (
%[9]s
    )
)`, readsAt(1), readsAt(6), readsAt(24), readsAt(72), readsAt(168),
		reachedAfter("half", "r >= latest_reads - intDiv(latest_reads, 2)"), reachedAfter("nine_tenths", "r >= latest_reads - intDiv(latest_reads, 10)"),
		RowUInt64("r", RowReadCount), indent(indent(ageCurvesOf(d, where, extra))), carried, inner)
}

// shareCarried is what a speed row carries of the share name (its
// index among the curve's buckets in name_idx, which is at least 1: the
// latest bucket reaches every share): the age and reads of the first
// bucket that reached it, and the most reads of a bucket after that one
// and before the latest, 0 when there is none.
func shareCarried(name string) string {
	return fmt.Sprintf(`ages[%[1]s_idx] AS %[1]s_age_hours,
    reads_by[%[1]s_idx] AS %[1]s_reads,
    arrayReduce('max', arrayPushFront(arrayFilter((r, i) -> i > %[1]s_idx AND i < length(reads_by), reads_by, arrayEnumerate(reads_by)), toUInt64(0))) AS %[1]s_between_reads`, name)
}

// projectReadByAge is project_read_by_age: per project and age on the
// grid, over the messages whose curve has that age (those seen at least
// that old), how many they are and the 10th, 50th and 90th percentile of
// their reads and read rates. A percentile is a value one of them has,
// as quantileExact takes it: the value at 0-based rank floor(q × n) of
// the n values sorted, no interpolation.
func projectReadByAge(d DDL) string {
	return fmt.Sprintf(`SELECT
    project_id,
    age_hours,
    messages,
    reads_q[2] AS reads_median,
    reads_q[1] AS reads_p10,
    reads_q[3] AS reads_p90,
    rate_q[2] AS read_rate_median,
    rate_q[1] AS read_rate_p10,
    rate_q[3] AS read_rate_p90
FROM
(
    SELECT
        project_id,
        age_hours,
        count() AS messages,
        quantilesExact(0.1, 0.5, 0.9)(reads) AS reads_q,
        quantilesExact(0.1, 0.5, 0.9)(read_rate) AS rate_q
    FROM
    (
%s
    )
    GROUP BY project_id, age_hours
)`, indent(indent(messageReadByAge(d))))
}

// ageViews are the views on the message's clock.
func ageViews(d DDL) []view {
	return []view{{ByAgeView, messageReadByAge(d)}, {SpeedView, messageReadSpeed(d)}, {ProjectByAgeView, projectReadByAge(d)}}
}

// AgeDDL is what migration 16 creates: the age rollup and the views on
// the message's clock, message_read_speed as that step defined it.
func AgeDDL(d DDL) []string {
	stmts := d.CreateTable(ageRollupTable.TableDef)
	for _, v := range []view{{ByAgeView, messageReadByAge(d)}, {SpeedView, messageReadSpeedV16(d)}, {ProjectByAgeView, projectReadByAge(d)}} {
		stmts = append(stmts, d.CreateView(v.name, v.query))
	}
	return stmts
}
