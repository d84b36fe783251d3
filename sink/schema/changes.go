package schema

import "fmt"

// The server records every change to the history the derived rows are
// computed from, whoever makes it: materialized views note, with the time
// of the INSERT, each project snapshot an INSERT into
// message_read_snapshots wrote rows at, and each cron tick an INSERT into
// sync_runs recorded. readsync's own writes, a spool replay, a process of
// an earlier release during a rolling upgrade and rows inserted by hand
// all land there alike, in the same INSERT as the rows, so no crash can
// separate the two. The reconcile (package derived's reconcile.go)
// refreshes what changed.

// Names of the change tables.
const (
	SnapshotChanges = "snapshot_changes"
	TickChanges     = "tick_changes"
)

// changeLayout stores a change table by the time of the change, so that
// the reconcile reads the latest changes by the primary key, and a month's
// partition can be dropped once no reconcile needs it.
func changeLayout(orderBy, shardBy string) layout {
	return layout{engine: engine{name: "MergeTree"}, partitionBy: "toYYYYMM(changed_at)", orderBy: orderBy, shardBy: shardBy, granularity: FineGranularity}
}

// snapshotChangesTable holds one row per INSERT block and project
// snapshot written.
var snapshotChangesTable = rollupTable{
	TableDef: TableDef{name: SnapshotChanges, columns: []ColumnDef{
		{"changed_at", "DateTime"}, {"project_id", "Int64"}, {"snapshot_at", "DateTime"},
	}, layout: changeLayout("(changed_at, project_id, snapshot_at)", "project_id")},
	fill: `SELECT now() AS changed_at, project_id, snapshot_at
FROM {from} {where}
GROUP BY project_id, snapshot_at`,
}

// tickChangesTable holds one row per INSERT block and cron tick recorded:
// a tick recorded late (a run record replayed from the spool, the ticks a
// daemon records as missed at start) changes the missed ticks of the
// intervals around it.
var tickChangesTable = rollupTable{
	TableDef: TableDef{name: TickChanges, columns: []ColumnDef{
		{"changed_at", "DateTime"}, {"schedule", "String"}, {"tick", "DateTime"},
	}, layout: changeLayout("(changed_at, schedule, tick)", "schedule")},
	fill: `SELECT now() AS changed_at, schedule, snapshot_at AS tick
FROM {from} WHERE trigger = 'cron'
GROUP BY schedule, snapshot_at`,
}

// createChangeLogs returns the statements that create the change tables
// and the materialized views that fill them.
func createChangeLogs(d DDL) []string {
	var stmts []string
	for _, c := range []struct {
		t      rollupTable
		source string
	}{{snapshotChangesTable, SnapshotsTable.name}, {tickChangesTable, RunsTable.name}} {
		stmts = append(stmts, d.CreateTable(c.t.TableDef)...)
		stmts = append(stmts, fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS\n%s",
			d.Table(c.t.name+"_mv"), d.OnCluster(), d.Local(c.t.name), c.t.selectFrom(d.Local(c.source), "")))
	}
	return stmts
}
