package schema

import (
	"fmt"

	"github.com/readsync/readsync/sink/chconn"
)

// How fast each message was read, stored: message_read_speed's values
// computed from every message's curve at each query (speedValues) cost
// seconds over all messages (the whole age rollup read and every curve
// built), so the speed rollup keeps them, a row per message, and the view
// reads it. The values stored are the ones the view computed: speedValues
// over the message's every row of the age rollup.
//
// A message's row is computed again from its curve whenever its curve
// may have changed: by the refresh after the write that added to its age
// rows (package derived's refreshSpeeds, after FillAges), by the
// reconcile and --repair where they compute age rows again from the
// stored history, and by migration 17 from the age rollup that migration
// 16 folded. Each computation reads the message's age rows only
// (SpeedRefill), by the sort key, which both releases narrow by: the rows
// of a curve, 73 and one a day of age.
//
// The rollup is partitioned by the month of create_at and expires with
// the daily resolution: a message's row goes with the month it was
// created in, as the start of its curve does from the age rollup. (A
// repair of its project after that computes it again from what the age
// rollup keeps of the curve, until the next expiry drops it again.)

// SpeedRollup is the speed rollup's name.
const SpeedRollup = "message_read_speed_rollup"

// speedRollupTable keeps, once merged, a row per message. Its engine is
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
var speedRollupTable = TableDef{name: SpeedRollup, columns: []ColumnDef{
	{"project_id", "Int64"}, {"message_id", "Int64"}, {"create_at", "DateTime"}, {"first_seen_age_hours", "UInt32"},
	{"reads_1h", "Nullable(UInt64)"}, {"reads_6h", "Nullable(UInt64)"}, {"reads_24h", "Nullable(UInt64)"},
	{"reads_72h", "Nullable(UInt64)"}, {"reads_7d", "Nullable(UInt64)"}, {"latest_reads", "UInt64"}, {"share_24h", "Nullable(Float64)"},
	{"half_after_hours_min", "Nullable(UInt32)"}, {"half_after_hours_max", "Nullable(UInt32)"},
	{"nine_tenths_after_hours_min", "Nullable(UInt32)"}, {"nine_tenths_after_hours_max", "Nullable(UInt32)"},
	{"version", "UInt64"},
}, layout: layout{
	engine:      engine{"ReplacingMergeTree", "version"},
	partitionBy: "toYYYYMM(create_at)",
	orderBy:     "(project_id, message_id)",
	shardBy:     "project_id",
	granularity: FineGranularity,
}}

// SpeedRefill is the INSERT that computes again the speed rollup's rows
// of the messages whose every age row the condition ages (on the age
// rollup's project_id and message_id) selects. A condition that selects
// only some of a message's age rows stores the values of part of its
// curve: name messages, not ages.
func SpeedRefill(n chconn.Names, ages string) string {
	d := DDL{n}
	return fmt.Sprintf("INSERT INTO %s (%s, version)\n%s", d.Table(SpeedRollup), speedColumns, speedValues(d, "WHERE "+ages, true))
}

// messageReadSpeed is message_read_speed: the speed rollup's rows, FINAL
// (the newest computation of each message), with the project's names
// and the message's subject.
func messageReadSpeed(d DDL) string {
	return speedNamed(d, fmt.Sprintf("SELECT %s%s\nFROM %s FINAL", speedColumns, d.FinalVersion(), d.Table(SpeedRollup)))
}

// SpeedDDL is what migration 17 creates: the speed rollup
// (SpeedTableDDL), and message_read_speed written again over it
// (SpeedViewDDL).
func SpeedDDL(d DDL) []string { return append(SpeedTableDDL(d), SpeedViewDDL(d)...) }

// SpeedTableDDL creates the speed rollup.
func SpeedTableDDL(d DDL) []string { return d.CreateTable(speedRollupTable) }

// SpeedViewDDL writes message_read_speed again over the speed rollup.
func SpeedViewDDL(d DDL) []string { return d.replaceView(view{SpeedView, messageReadSpeed(d)}) }
