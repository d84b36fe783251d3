package schema

// The tables of the move of message_read_snapshots onto its sort key
// (project_id, snapshot_at, message_id), which package resort runs in the
// background: the record of its steps, which migration 9 creates, the
// copy under the new key and the swap log, which the move creates, and
// the table as releases up to 0.5.0 sorted it, which the move keeps.

// Names of the move's tables.
const (
	// Resorts records the move's steps.
	Resorts = "snapshot_resorts"
	// ResortCopy is message_read_snapshots copied under the new sort
	// key. It exists while the move is under way: expiry waits for it to
	// finish.
	ResortCopy = "message_read_snapshots_resorted"
	// PresortSnapshots is message_read_snapshots as releases up to 0.5.0
	// sorted it, kept after the move.
	PresortSnapshots = "message_read_snapshots_presort"
	// SwapLog records, in cluster mode, the project snapshots the old
	// table takes while the swap points the views at the copy.
	SwapLog = "snapshot_resort_swaps"
)

// resortsTable records each step of the move: its phase (setup, copy,
// copied, swap, swapped), the partition and the last project it copied.
var resortsTable = TableDef{name: Resorts, columns: []ColumnDef{
	{"at", "DateTime"}, {"phase", "String"}, {"partition", "String"}, {"last_project", "Int64"}, {"rows", "UInt64"},
}, layout: layout{engine: engine{name: "MergeTree"}, orderBy: "at", shardBy: "toUInt32(at)"}}

// swapLogTable is the swap log's table.
var swapLogTable = TableDef{name: SwapLog, columns: []ColumnDef{{"project_id", "Int64"}, {"snapshot_at", "DateTime"}},
	layout: layout{engine: engine{name: "MergeTree"}, orderBy: "(project_id, snapshot_at)", shardBy: "project_id"}}

// ResortDDL is what migration 9 creates: the record of the move's steps.
// The copy and its view are created by the move's first step, once the
// server has room for them.
func ResortDDL(d DDL) []string { return d.CreateTable(resortsTable) }

// ResortCopyDDL creates the copy: message_read_snapshots's columns and
// layout, under the name ResortCopy.
func ResortCopyDDL(d DDL) []string {
	def := SnapshotsTable.Def()
	def.name = ResortCopy
	return d.CreateTable(def)
}

// SwapLogDDL creates the swap log.
func SwapLogDDL(d DDL) []string { return d.CreateTable(swapLogTable) }
