package schema

// What lets a refresh of a project's newest snapshot cost what it wrote:
// the project's tip, and the record of the refreshes that ran.
//
// The tip is the derived state at a project's newest snapshot that the
// next one's refresh builds on: the sums of the reads gained over that
// snapshot's UTC day and hour so far, with the sums of their keys. With
// it and the messages' latest rows (message_read_latest_rollup), read
// before the write, the refresh of a snapshot newer than all of its
// project's computes the gains, the day's and the hour's values and their
// gains without reading the history (package derived's tips.go).
//
// The record of refreshes lets the reconcile leave alone what a writer
// refreshed: each refresh after a write records, per project snapshot it
// computed, when its reads began and when it was done; each recomputation
// from the stored history (the reconcile's, a fold's, a repair's)
// records, per project, that it starts, before it reads, and that it
// ended. A change that its writer refreshed after it was made, with no
// other write or recomputation of its project around it, needs nothing
// more (package derived's refreshes.go says the rule).

// Names of the tip rollup and of the record of refreshes.
const (
	TipRollup = "project_read_tip_rollup"
	Refreshes = "refreshes"
)

// tipRollupTable holds, once merged, one row per project: the maximum of
// the tips its refreshes wrote, each a String that sorts by the snapshot,
// then by the key of the day's sums (package derived encodes it).
var tipRollupTable = TableDef{name: TipRollup, columns: []ColumnDef{
	{"project_id", "Int64"}, {"tip_state", "AggregateFunction(max, String)"},
}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "", "project_id")}

// Kinds of the rows of the record of refreshes.
const (
	// RefreshStarts is a recomputation from the stored history that
	// starts: at is when, before it reads.
	RefreshStarts = 0
	// RefreshDone is a refresh after a write that is done: read_at is
	// when its reads began, before the write, and at when it was done.
	RefreshDone = 1
	// RefreshEnds is a recomputation that ended, having written what it
	// computed: at is when.
	RefreshEnds = 2
)

// refreshesTable is the record of refreshes, a row per project (and
// project snapshot, for a refresh done) and refresh, sorted by kind, then
// time, so that the reconcile reads the rows of a kind around the time of
// the changes it reads.
var refreshesTable = TableDef{name: Refreshes, columns: []ColumnDef{
	{"kind", "UInt8"}, {"at", "DateTime"}, {"refresh_id", "UInt64"}, {"project_id", "Int64"},
	{"snapshot_at", "DateTime"}, {"read_at", "DateTime"},
}, layout: layout{
	engine: engine{name: "MergeTree"}, partitionBy: "toYYYYMM(at)", orderBy: "(kind, at, project_id)",
	shardBy: "project_id", granularity: FineGranularity,
}}

// TipsDDL is what migration 15 creates.
func TipsDDL(d DDL) []string {
	return append(d.CreateTable(tipRollupTable), d.CreateTable(refreshesTable)...)
}
