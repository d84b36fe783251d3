package schema

import (
	"fmt"
	"strings"
	"time"

	"github.com/readsync/readsync/sink/chconn"
)

// How fast each message was read, stored: message_read_speed's values
// computed from every message's curve at each query (speedValues) cost
// seconds over all messages (the whole age rollup read and every curve
// built), so the speed rollup keeps them, a row per message, and the view
// reads it. The values stored are the ones the view computed: speedValues
// over the message's every row of the age rollup.
//
// The refresh after a write carries each written message's row forward:
// it computes the next row from the previous one and the snapshots the
// write added to the curve (package derived's speeds.go), reading one row
// a message, and computes it from the curve only where the row cannot
// decide (a message's first write, a write out of order, a fall, a share
// that moves into a bucket the row does not describe). The reconcile and
// --repair, where they compute age rows again from the stored history,
// and migration 17, from the age rollup that migration 16 folded, compute
// the rows from the curves. A computation from the curves reads the
// messages' age rows only (SpeedRefill), by the sort key, which both
// releases narrow by: the rows of a curve, 73 and one a day of age.
//
// The rollup is not partitioned and never expires: a row per message,
// like the latest and first rollups, which keep the message's state as
// the messages table keeps its subject. An INSERT writes a part per
// partition its rows span, and a write's messages span every month in
// which messages still read were created: partitioned by the month of
// create_at (to expire with the daily resolution), a batch wrote 13 parts
// in the bench (messages created over 13 months) and a daemon's pass a
// part per month of creation, which merges then undid. Kept, a row also
// outlives the start of its curve, which the age rollup drops by the
// month of its buckets: the next write carries it forward as before, and
// a computation from the curve (a write the row cannot decide, the
// reconcile, --repair) computes it from what the age rollup keeps.
// --verify judges no message created before the daily edge, and --repair
// leaves the row of a message with no age row left (package derived's
// repair.go).

// SpeedRollup is the speed rollup's name.
const SpeedRollup = "message_read_speed_rollup"

// SpeedTable keeps, once merged, a row per message. Its engine is
// ReplacingMergeTree by version, the highest version of the snapshots the
// computation's curve holds, so that the newest computation wins: the age
// rollup only grows (each bucket keeps a maximum), so a computation that
// runs later reads every row an earlier one read, or a later snapshot in
// its bucket, and its version is at least the earlier's; at equal
// versions ReplacingMergeTree keeps the row inserted last, the later
// computation's. (A bucket's row that gives way to a later snapshot
// written with an older version, the newest of the curve's, lowers it: a
// write that old replayed after a newer write of an earlier snapshot.
// --verify reports the row that then stays, and --repair mends it.) An
// AggregatingMergeTree of argMax states would keep the same row but cost
// a merge of 15 states per message at every read of the view; the rows
// here are read FINAL, which costs little once the parts are merged.
//
// Past the values the view shows, a row carries what the next write needs
// to compute the next row from it and the snapshots it adds, without
// reading the curve (package derived's speeds.go): the ages of the
// curve's first and latest buckets, the latest bucket's snapshot time and
// version (what tells a later snapshot from an earlier one), and, for
// each share, the bucket that first reached it (its age and reads) and the
// most reads of any bucket between that one and the latest (exclusive; 0
// when none): a later write whose bound passes the bucket's reads moves
// the share to the latest bucket or a later one when no bucket between
// reaches the new bound. The carried values are speedValues' too, over
// the whole curve, so a row computed from the curve and a row carried
// forward are the same row.
//
// The table stores a row in seven columns, not a column per value: on
// 18.16, which writes every column of a part as files of its own, a
// column per value made 78 files of each part an INSERT writes (then a
// part per month of creation its messages spanned), most of what a
// pass's INSERTs created. The values are packed into one array
// (speed_values), their NULLs into a bit mask (speed_nulls) and the one
// fraction into a column of its own; each value is also an ALIAS column of
// its name and type, so that every reader (the view, the carry's read,
// --verify) reads the columns by name as before. The rows are written
// packed (SpeedInsert, and the Go encoding below), never through the
// aliases.
var SpeedTable = &table[SpeedRow]{
	name: SpeedRollup,
	columns: []column[SpeedRow]{
		{"project_id", "Int64", func(r *SpeedRow) any { return r.ProjectID }},
		{"message_id", "Int64", func(r *SpeedRow) any { return r.MessageID }},
		{"create_at", "DateTime", func(r *SpeedRow) any { return time.Unix(int64(r.CreateAt), 0).UTC() }},
		{"version", "UInt64", func(r *SpeedRow) any { return r.Version }},
		{"speed_nulls", "UInt16", func(r *SpeedRow) any { return speedNulls(r) }},
		{"speed_share_24h", "Float64", func(r *SpeedRow) any {
			if r.Share24h == nil {
				return float64(0)
			}
			return *r.Share24h
		}},
		{"speed_values", "Array(UInt64)", func(r *SpeedRow) any { return speedPacked(r) }},
	},
	aliases: speedAliases(),
	layout: layout{
		engine:      engine{"ReplacingMergeTree", "version"},
		orderBy:     "(project_id, message_id)",
		shardBy:     "project_id",
		granularity: FineGranularity,
	},
}

// speedField is a value of a speed row, packed: its column's name and
// type, where the row keeps it (slot, its index in speed_values from 1;
// 0 for the share, kept in speed_share_24h), its bit in speed_nulls (-1:
// never NULL), and its value in a SpeedRow (false for NULL).
type speedField struct {
	name, typ string
	slot      int
	null      int
	get       func(*SpeedRow) (uint64, bool)
}

// speedFields lists a speed row's values in the order of the columns the
// readers name (SpeedColumnList), between the key columns and version and
// after it (speedBeforeVersion of them before). A declaration, never
// modified.
var speedFields = []speedField{
	{"first_seen_age_hours", "UInt32", 1, -1, func(r *SpeedRow) (uint64, bool) { return uint64(r.FirstSeenAgeHours), true }},
	{"reads_1h", "Nullable(UInt64)", 2, 0, func(r *SpeedRow) (uint64, bool) { return opt64(r.ReadsAt[0]) }},
	{"reads_6h", "Nullable(UInt64)", 3, 1, func(r *SpeedRow) (uint64, bool) { return opt64(r.ReadsAt[1]) }},
	{"reads_24h", "Nullable(UInt64)", 4, 2, func(r *SpeedRow) (uint64, bool) { return opt64(r.ReadsAt[2]) }},
	{"reads_72h", "Nullable(UInt64)", 5, 3, func(r *SpeedRow) (uint64, bool) { return opt64(r.ReadsAt[3]) }},
	{"reads_7d", "Nullable(UInt64)", 6, 4, func(r *SpeedRow) (uint64, bool) { return opt64(r.ReadsAt[4]) }},
	{"latest_reads", "UInt64", 7, -1, func(r *SpeedRow) (uint64, bool) { return r.LatestReads, true }},
	{"share_24h", "Nullable(Float64)", 0, 5, func(r *SpeedRow) (uint64, bool) { return 0, r.Share24h != nil }},
	{"half_after_hours_min", "Nullable(UInt32)", 8, 6, func(r *SpeedRow) (uint64, bool) { return opt32(r.Shares[0].AfterMin) }},
	{"half_after_hours_max", "Nullable(UInt32)", 9, 7, func(r *SpeedRow) (uint64, bool) { return opt32(r.Shares[0].AfterMax) }},
	{"nine_tenths_after_hours_min", "Nullable(UInt32)", 10, 8, func(r *SpeedRow) (uint64, bool) { return opt32(r.Shares[1].AfterMin) }},
	{"nine_tenths_after_hours_max", "Nullable(UInt32)", 11, 9, func(r *SpeedRow) (uint64, bool) { return opt32(r.Shares[1].AfterMax) }},
	// version, a column of its own, comes here.
	{"first_age_hours", "UInt32", 12, -1, func(r *SpeedRow) (uint64, bool) { return uint64(r.FirstAge), true }},
	{"latest_age_hours", "UInt32", 13, -1, func(r *SpeedRow) (uint64, bool) { return uint64(r.LatestAge), true }},
	{"latest_at", "DateTime", 14, -1, func(r *SpeedRow) (uint64, bool) { return uint64(r.LatestAt), true }},
	{"latest_version", "UInt64", 15, -1, func(r *SpeedRow) (uint64, bool) { return r.LatestVersion, true }},
	{"half_age_hours", "UInt32", 16, -1, func(r *SpeedRow) (uint64, bool) { return uint64(r.Shares[0].Age), true }},
	{"half_reads", "UInt64", 17, -1, func(r *SpeedRow) (uint64, bool) { return r.Shares[0].Reads, true }},
	{"half_between_reads", "UInt64", 18, -1, func(r *SpeedRow) (uint64, bool) { return r.Shares[0].Between, true }},
	{"nine_tenths_age_hours", "UInt32", 19, -1, func(r *SpeedRow) (uint64, bool) { return uint64(r.Shares[1].Age), true }},
	{"nine_tenths_reads", "UInt64", 20, -1, func(r *SpeedRow) (uint64, bool) { return r.Shares[1].Reads, true }},
	{"nine_tenths_between_reads", "UInt64", 21, -1, func(r *SpeedRow) (uint64, bool) { return r.Shares[1].Between, true }},
}

// opt64 and opt32 are a Nullable value of a SpeedRow: its value, false
// for NULL.
func opt64(p *uint64) (uint64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

func opt32(p *uint32) (uint64, bool) {
	if p == nil {
		return 0, false
	}
	return uint64(*p), true
}

// speedBeforeVersion is how many of speedFields come before version in
// the columns the readers name.
const speedBeforeVersion = 12

// speedSlots is the length of speed_values.
const speedSlots = 21

// speedAliases are the speed rollup's ALIAS columns: each value by its
// name and type, read from where the row packs it.
func speedAliases() []aliasColumn {
	var out []aliasColumn
	for _, f := range speedFields {
		var expr string
		switch f.typ {
		case "UInt64", "Nullable(UInt64)":
			expr = fmt.Sprintf("speed_values[%d]", f.slot)
		case "UInt32", "Nullable(UInt32)":
			expr = fmt.Sprintf("toUInt32(speed_values[%d])", f.slot)
		case "DateTime":
			expr = fmt.Sprintf("toDateTime(toUInt32(speed_values[%d]))", f.slot)
		case "Nullable(Float64)":
			expr = "speed_share_24h"
		default:
			panic("schema: no packing of a speed value of type " + f.typ)
		}
		if f.null >= 0 {
			expr = fmt.Sprintf("if(bitTest(speed_nulls, %d), NULL, %s)", f.null, expr)
		}
		out = append(out, aliasColumn{f.name, f.typ, expr})
	}
	return out
}

// speedNulls is the bit mask of a row's NULL values.
func speedNulls(r *SpeedRow) uint16 {
	var m uint16
	for _, f := range speedFields {
		if _, ok := f.get(r); f.null >= 0 && !ok {
			m |= 1 << f.null
		}
	}
	return m
}

// speedPacked is a row's speed_values: each value in its slot, 0 for a
// NULL.
func speedPacked(r *SpeedRow) []uint64 {
	out := make([]uint64, speedSlots)
	for _, f := range speedFields {
		if v, ok := f.get(r); ok && f.slot > 0 {
			out[f.slot-1] = v
		}
	}
	return out
}

// SpeedColumnList is the speed rollup's columns as its readers name them
// (the key, the values, version, what a row carries), which SpeedOfCurves
// computes in this order too: "project_id, message_id, …".
func SpeedColumnList() string {
	names := []string{"project_id", "message_id", "create_at"}
	for i, f := range speedFields {
		if i == speedBeforeVersion {
			names = append(names, "version")
		}
		names = append(names, f.name)
	}
	return strings.Join(names, ", ")
}

// SpeedInsert is the INSERT into the speed rollup of the rows of the
// SELECT rows, whose columns are SpeedColumnList's, packed as the table
// stores them.
func SpeedInsert(n chconn.Names, rows string) string {
	var nulls, values []string
	for _, f := range speedFields {
		if f.null >= 0 {
			nulls = append(nulls, fmt.Sprintf("isNull(%s) * %d", f.name, 1<<f.null))
		}
		switch {
		case f.slot == 0:
		case f.null >= 0:
			values = append(values, fmt.Sprintf("ifNull(toUInt64(%s), 0)", f.name))
		default:
			values = append(values, fmt.Sprintf("toUInt64(%s)", f.name))
		}
	}
	return fmt.Sprintf("INSERT INTO %s (%s)\nSELECT project_id, message_id, create_at, version, toUInt16(%s), ifNull(share_24h, 0), [%s]\nFROM\n(\n%s\n)",
		n.Table(SpeedRollup), SpeedTable.ColumnList(), strings.Join(nulls, " + "), strings.Join(values, ", "), indent(rows))
}

// SpeedRow is a row of the speed rollup. Times are Unix seconds; a nil
// value is NULL.
type SpeedRow struct {
	ProjectID, MessageID int64
	CreateAt             uint32
	FirstSeenAgeHours    uint32
	// ReadsAt are the reads at the ages SpeedAges: reads_1h to reads_7d.
	ReadsAt     [len(SpeedAges)]*uint64
	LatestReads uint64
	Share24h    *float64
	// Shares are half, then nine tenths, of the latest reads (SpeedShares).
	Shares  [2]SpeedShare
	Version uint64
	// The ages of the first and the latest buckets of the curve, and the
	// snapshot time and version of the latest bucket's row.
	FirstAge, LatestAge uint32
	LatestAt            uint32
	LatestVersion       uint64
}

// SpeedShare is what a speed row holds of when a message reached a share
// of its latest reads.
type SpeedShare struct {
	// AfterMin and AfterMax are the bound the view shows.
	AfterMin, AfterMax *uint32
	// Age and Reads are the first bucket whose reads reach the share, and
	// Between the most reads of a bucket after it and before the latest
	// (0 when there is none).
	Age            uint32
	Reads, Between uint64
}

// SpeedAges are the ages, in hours, of reads_1h, reads_6h, reads_24h,
// reads_72h and reads_7d.
var SpeedAges = [...]uint32{1, 6, 24, 72, 168}

// SpeedShareBound is the reads at which a message whose latest reads are
// latest reaches share s (0: half, 1: nine tenths), as reachedAfter's
// conditions say: the least r with r ≥ latest / 2 (or 9 × latest / 10).
func SpeedShareBound(s int, latest uint64) uint64 {
	if s == 0 {
		return latest - latest/2
	}
	return latest - latest/10
}

// AgeBucket is AgeOf in Go: the age bucket of a snapshot taken at at of a
// message created at created (Unix seconds).
func AgeBucket(created, at uint32) uint32 {
	if at <= created {
		return 0
	}
	h := (at - created + 3599) / 3600
	if h <= HourlyAges {
		return h
	}
	return HourlyAges + 24*((h-HourlyAges+23)/24)
}

// GridBefore is the age on the grid of ages (0, 1, …, 72, 96, …) before
// age a (> 0), which is on it: what reachedAfter bounds a share by from
// below.
func GridBefore(a uint32) uint32 {
	if a <= HourlyAges {
		return a - 1
	}
	return a - 24
}

// SpeedRows is the SELECT of the speed rollup's rows (the columns
// SpeedColumnList names, FINAL: the newest computation of each message) that the
// condition where selects.
func SpeedRows(n chconn.Names, where string) string {
	return fmt.Sprintf("SELECT %s\nFROM %s FINAL\nWHERE %s", SpeedColumnList(), n.Table(SpeedRollup), where)
}

// SpeedRefill is the INSERT that computes again the speed rollup's rows
// of the messages whose every age row the condition ages (on the age
// rollup's project_id and message_id) selects. A condition that selects
// only some of a message's age rows stores the values of part of its
// curve: name messages, not ages.
func SpeedRefill(n chconn.Names, ages string) string {
	return SpeedInsert(n, SpeedOfCurves(n, ages))
}

// SpeedOfCurves is the SELECT of the speed rollup's rows (the columns
// SpeedColumnList names) computed from the curves of the messages whose every age row
// the condition ages selects: what the speed rollup holds of them, by
// definition (SpeedRefill), and what a row carried forward must equal.
func SpeedOfCurves(n chconn.Names, ages string) string {
	return speedValues(DDL{Names: n}, "WHERE "+ages, true)
}

// messageReadSpeed is message_read_speed: the speed rollup's rows, FINAL
// (the newest computation of each message), with the project's names
// and the message's subject.
func messageReadSpeed(d DDL) string {
	return speedNamed(d, fmt.Sprintf("SELECT %s%s\nFROM %s FINAL%s", speedColumns, d.FinalVersion(), d.Table(SpeedRollup), d.lookupsWhere("project_id")))
}

// SpeedDDL is what migration 17 creates: the speed rollup
// (SpeedTableDDL), and message_read_speed written again over it
// (SpeedViewDDL).
func SpeedDDL(d DDL) []string { return append(SpeedTableDDL(d), SpeedViewDDL(d)...) }

// SpeedTableDDL creates the speed rollup.
func SpeedTableDDL(d DDL) []string { return d.CreateTable(SpeedTable.Def()) }

// SpeedViewDDL writes message_read_speed again over the speed rollup.
func SpeedViewDDL(d DDL) []string { return d.replaceView(view{SpeedView, messageReadSpeed(d)}) }
