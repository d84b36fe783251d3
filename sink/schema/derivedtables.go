package schema

import (
	"fmt"
	"time"
)

// The tables of the derived history that the refreshes and the reconciles
// write (package derived computes their rows): the reads gained per
// project snapshot and per day, when each message was first seen, the
// schedules release 0.3.0 counted missed ticks by, and the record of
// reconciles.

// Names of the gains tables.
const (
	GainsRollup = "project_read_gain_rollup"
	FirstRollup = "message_read_first_rollup"
)

// GainRow is what one refresh computed for a project at a snapshot.
type GainRow struct {
	ProjectID  int64
	SnapshotAt time.Time
	// Key orders the refreshes of one project and snapshot: the views
	// keep the values of the highest.
	Key string
	// PrevAt is the latest earlier snapshot of the messages listed at
	// SnapshotAt, the zero Unix time when all of them are new.
	PrevAt      time.Time
	Messages    uint64
	NewMessages uint64
	Reads       int64
	// MissedTicks is how many ticks of Schedule between PrevAt and
	// SnapshotAt gave the project no snapshot.
	MissedTicks uint64
	// Schedule is the schedule whose ticks MissedTicks counts, empty when
	// none is known.
	Schedule string
	// The project's newest write at the snapshot (the rows of its highest
	// version): what project_read_snapshots shows.
	SnapMessages, SnapReads, SnapTotal uint64
}

// GainsTable is the gains rollup: a plain MergeTree, one row per refresh.
// The views choose between a snapshot's rows at query time, which costs
// the rows they return (a refresh writes a row only when its key differs
// from the snapshot's highest, so there are seldom two); folding them into
// an aggregate state at INSERT would cost an INSERT … SELECT per refresh
// instead of a native block. It holds a snapshot's newest write too
// (migration 7 added those columns): the per-snapshot view is then a
// choice between refreshes, which a repeated INSERT does not change,
// rather than a sum, which it does.
var GainsTable = &table[GainRow]{
	name: GainsRollup,
	columns: []column[GainRow]{
		{"project_id", "Int64", func(g *GainRow) any { return g.ProjectID }},
		{"snapshot_at", "DateTime", func(g *GainRow) any { return g.SnapshotAt }},
		{"gain_key", "String", func(g *GainRow) any { return g.Key }},
		{"gain_prev_at", "DateTime", func(g *GainRow) any { return g.PrevAt }},
		{"gain_messages", "UInt64", func(g *GainRow) any { return g.Messages }},
		{"gain_new_messages", "UInt64", func(g *GainRow) any { return g.NewMessages }},
		{"gain_reads", "Int64", func(g *GainRow) any { return g.Reads }},
		{"gain_missed_ticks", "UInt64", func(g *GainRow) any { return g.MissedTicks }},
		{"gain_schedule", "String", func(g *GainRow) any { return g.Schedule }},
		{"gain_snap_messages", "UInt64", func(g *GainRow) any { return g.SnapMessages }},
		{"gain_snap_reads", "UInt64", func(g *GainRow) any { return g.SnapReads }},
		{"gain_snap_total", "UInt64", func(g *GainRow) any { return g.SnapTotal }},
	},
	layout: snapshotRollupLayout(engine{name: "MergeTree"}, "(project_id, snapshot_at)"),
}

// GainColumnsSince7 are the gains rollup's columns migration 7 added.
var GainColumnsSince7 = []string{"gain_snap_messages", "gain_snap_reads", "gain_snap_total"}

// firstRollupTable holds when each message was first seen: what tells a
// message new at a snapshot from one listed again after a while, without
// reading its history.
var firstRollupTable = rollupTable{
	TableDef: TableDef{name: FirstRollup, columns: []ColumnDef{
		{"project_id", "Int64"}, {"message_id", "Int64"}, {"first_seen", "AggregateFunction(min, DateTime)"},
	}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "", "(project_id, message_id)")},
	fill: `SELECT project_id, message_id, minState(snapshot_at) AS first_seen
FROM {from} {where}
GROUP BY project_id, message_id`,
}

// dayGainsTable is the day gains rollup: once merged, one row per project
// and UTC day, the gains of the day's snapshots summed, which
// project_read_daily_gains shows. Each refresh stores the day's values
// with a key that grows with the rows it saw (package derived's
// gaindays.go says how).
var dayGainsTable = TableDef{name: DayGainsRollup, columns: []ColumnDef{
	{"project_id", "Int64"}, {"day", "Date"},
	{"day_gain_state", "AggregateFunction(argMax, Tuple(UInt64, UInt64, Int64, UInt64), String)"},
}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "toYYYYMM(day)", "(project_id, day)")}

// DayGainsRollup is the day gains rollup's name.
const DayGainsRollup = "project_read_day_gain_rollup"

// LegacySchedules is the table of the schedules release 0.3.0 counted
// snapshots' missed ticks by. Migration 7 fills it once; nothing writes it
// after.
const LegacySchedules = "snapshot_schedules"

// legacySchedulesTable holds, per project snapshot, the schedule release
// 0.3.0 counted its missed ticks by.
var legacySchedulesTable = TableDef{name: LegacySchedules, columns: []ColumnDef{
	{"project_id", "Int64"}, {"snapshot_at", "DateTime"}, {"schedule", "String"},
}, layout: layout{engine: engine{name: "ReplacingMergeTree"}, partitionBy: "toYYYYMM(snapshot_at)", orderBy: "(project_id, snapshot_at)", shardBy: "project_id"}}

// Reconciles is the name of reconcilesTable.
const Reconciles = "reconciles"

// reconcilesTable records each reconcile step that completed: the
// position in the change logs it read up to, and what it found. Release
// 0.4.0 created it without the columns of a step's exact position
// (ReconcileColumnsSince8), and recorded only changes_to, up to which it
// had read every change less 15 minutes; migration 8 adds them there. A
// database created since has them from the start, so that a cluster's
// replicated table is never altered ON CLUSTER, which 18.16's DDL worker
// can fail at when a replica already has the column.
var reconcilesTable = TableDef{name: Reconciles, columns: append([]ColumnDef{
	{"started_at", "DateTime"}, {"changes_from", "DateTime"}, {"changes_to", "DateTime"},
	{"changed_snapshots", "UInt64"}, {"changed_ticks", "UInt64"}, {"refreshed_snapshots", "UInt64"},
	{"rewritten_gains", "UInt64"}, {"duration_ms", "UInt64"},
}, ReconcileColumnsSince8...), layout: layout{engine: engine{name: "MergeTree"}, partitionBy: "toYYYYMM(started_at)", orderBy: "started_at", shardBy: "toUInt32(started_at)"}}

// ReconcileColumnsSince8 are the columns migration 8 adds to
// reconcilesTable, in order: keyset, 1 for a step of this form, 0 for a
// record of release 0.4.0; the step's position, with changes_to for the
// snapshot change log's (its change time) and tick_changes_to for the
// tick change log's; who ran it (a daemon process, empty for a one-off
// command); and the changes that still waited after it.
var ReconcileColumnsSince8 = []ColumnDef{
	{"keyset", "UInt8"},
	{"cursor_project_id", "Int64"}, {"cursor_snapshot_at", "DateTime"},
	{"tick_changes_to", "DateTime"}, {"tick_cursor_schedule", "String"}, {"tick_cursor_tick", "DateTime"},
	{"owner", "String"}, {"pending_changes", "UInt64"},
}

// GainsTablesDDL creates the tables of migration 6, and the materialized
// view that fills the first-seen rollup.
func GainsTablesDDL(d DDL) []string {
	var stmts []string
	for _, t := range []TableDef{firstRollupTable.TableDef, GainsTable.Def(), dayGainsTable} {
		stmts = append(stmts, d.CreateTable(t)...)
	}
	return append(stmts, fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS\n%s",
		d.Table(FirstRollup+"_mv"), d.OnCluster(), d.Local(FirstRollup), firstRollupTable.selectFrom(d.Local(SnapshotsTable.name), "")))
}

// DerivedTablesDDL creates the tables of migration 7: the schedules of
// release 0.3.0, the record of reconciles, and the change logs with the
// materialized views that fill them.
func DerivedTablesDDL(d DDL) []string {
	var stmts []string
	for _, t := range []TableDef{legacySchedulesTable, reconcilesTable} {
		stmts = append(stmts, d.CreateTable(t)...)
	}
	return append(stmts, createChangeLogs(d)...)
}
