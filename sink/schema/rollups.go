package schema

import (
	"fmt"
	"strings"

	"github.com/readsync/readsync/sink/chconn"
)

// The rollups the dashboard views read instead of aggregating the whole
// snapshot history at every query. Materialized views fill them from every
// INSERT into message_read_snapshots; migration 2's fold (package migrate)
// fills them from the history written before they existed.
const (
	LatestRollup   = "message_read_latest_rollup"
	DailyRollup    = "message_read_daily_rollup"
	SnapshotRollup = "project_read_snapshot_rollup"
	DayRollup      = "project_read_day_rollup"
)

// rollupTable is a rollup: its table, and the SELECT over the snapshot
// history that fills it, used by its materialized view for new rows and by
// the fold for old ones. Columns are named apart from the snapshot
// columns: 18.16 substitutes an alias wherever its name appears in the
// same SELECT, so max(…) AS latest would be cyclic next to a column latest.
type rollupTable struct {
	TableDef
	// fill selects from {from}, the snapshot table, with {where} a WHERE
	// clause (empty, or restricting the rows).
	fill string
}

// selectFrom returns the rollup's fill from the table from, restricted by
// the WHERE clause where.
func (r rollupTable) selectFrom(from, where string) string {
	return strings.NewReplacer("{from}", from, "{where}", where).Replace(r.fill)
}

// rollupLayout stores a rollup like the snapshot table it derives from:
// in cluster mode, replicated, and sharded by project so that a project's
// rollup rows sit on the shard of its snapshots.
func rollupLayout(e engine, partitionBy, orderBy string) layout {
	return layout{engine: e, partitionBy: partitionBy, orderBy: orderBy, shardBy: "project_id"}
}

// FineGranularity is the index_granularity of the tables with a row per
// project snapshot or per tick: the rollups of project snapshots, the
// change logs and sync_runs. A refresh or a reconcile step reads a few of
// their rows around what changed (a project's previous snapshot, a day's
// gains, the ticks of an interval, the changes after a position), for
// which the server reads whole granules, one per project and part at
// least. Granules of 1 024 rows make such a read cost an eighth of what
// the default's 8 192 do, for a primary index eight times as large, which
// for rows this few stays small: about 20 MB of memory a billion rows.
// The snapshot table keeps the default: a project snapshot's rows there
// are as many as its messages.
const FineGranularity = 1024

// snapshotRollupLayout stores a rollup with a row per project snapshot:
// like rollupLayout, by month, in granules of FineGranularity.
func snapshotRollupLayout(e engine, orderBy string) layout {
	l := rollupLayout(e, "toYYYYMM(snapshot_at)", orderBy)
	l.granularity = FineGranularity
	return l
}

func rollupTables() []rollupTable {
	return []rollupTable{
		{
			// One row per message: its latest snapshot.
			TableDef: TableDef{name: LatestRollup, columns: []ColumnDef{
				{"project_id", "Int64"}, {"message_id", "Int64"}, {"latest_row", "AggregateFunction(max, String)"},
			}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "", "(project_id, message_id)")},
			fill: `SELECT project_id, message_id, maxState(` + SnapshotRow + `) AS latest_row
FROM {from} {where}
GROUP BY project_id, message_id`,
		},
		{
			// One row per message and UTC day: its last snapshot of the day.
			TableDef: TableDef{name: DailyRollup, columns: []ColumnDef{
				{"project_id", "Int64"}, {"day", "Date"}, {"message_id", "Int64"}, {"day_row", "AggregateFunction(max, String)"},
			}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "toYYYYMM(day)", "(project_id, day, message_id)")},
			fill: `SELECT project_id, toDate(snapshot_at, 'UTC') AS day, message_id, maxState(` + SnapshotRow + `) AS day_row
FROM {from} {where}
GROUP BY project_id, day, message_id`,
		},
		{
			// One row per write of a project at a snapshot: readsync gives
			// every write of a project its own version, so summing the
			// rows of one (project, snapshot, version) sums one write.
			TableDef: TableDef{name: SnapshotRollup, columns: []ColumnDef{
				{"project_id", "Int64"}, {"snapshot_at", "DateTime"}, {"version", "UInt64"},
				{"write_messages", "UInt64"}, {"write_reads", "UInt64"}, {"write_total", "UInt64"},
			}, layout: snapshotRollupLayout(engine{name: "SummingMergeTree"}, "(project_id, snapshot_at, version)")},
			fill: `SELECT
    project_id,
    snapshot_at,
    version,
    count() AS write_messages,
    sum(read_count) AS write_reads,
    sum(total) AS write_total
FROM {from} {where}
GROUP BY project_id, snapshot_at, version`,
		},
	}
}

// Refill is the INSERT that fills a rollup a materialized view keeps, from
// the snapshot rows a WHERE clause selects: what rebuilds a rollup's rows
// of some projects.
type Refill struct {
	// Rollup is the rollup's name.
	Rollup string
	// Insert is the statement.
	Insert string
}

// Refills returns the Refill of each rollup a materialized view keeps,
// for the snapshot rows where selects, in the order of their views.
func Refills(n chconn.Names, where string) []Refill {
	d := DDL{Names: n}
	var out []Refill
	for _, r := range append(rollupTables(), firstRollupTable, hourlyRollupTable) {
		from := d.Table(SnapshotsTable.name)
		if r.name == SnapshotRollup {
			// It sums the rows of each write: each row once.
			from += " FINAL"
		}
		out = append(out, Refill{Rollup: r.name, Insert: fmt.Sprintf("INSERT INTO %s %s", d.Table(r.name), r.selectFrom(from, where))})
	}
	return out
}

// RollupTablesDDL creates the tables of migration 2: the rollups and the
// record of the fold.
func RollupTablesDDL(d DDL) []string {
	rollups := rollupTables()
	var stmts []string
	for _, t := range []TableDef{rollups[0].TableDef, rollups[1].TableDef, rollups[2].TableDef, dayRollupTable, foldsTable} {
		stmts = append(stmts, d.CreateTable(t)...)
	}
	return stmts
}

// RollupViewsFillDDL creates the materialized views that fill the rollups
// from every INSERT into message_read_snapshots.
func RollupViewsFillDDL(d DDL) []string {
	var stmts []string
	for _, r := range rollupTables() {
		stmts = append(stmts, fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS\n%s",
			d.Table(r.name+"_mv"), d.OnCluster(), d.Local(r.name), r.selectFrom(d.Local("message_read_snapshots"), "")))
	}
	return stmts
}

// RollupFolds is the name of foldsTable.
const RollupFolds = "project_read_snapshot_rollup_folds"

// foldsTable records the partitions of message_read_snapshots folded into
// the summing rollup, which must not fold one twice, and in a row with an
// empty partition the fold's cutoff version.
var foldsTable = TableDef{name: RollupFolds, columns: []ColumnDef{{"partition", "String"}, {"cutoff", "UInt64"}},
	layout: layout{engine: engine{name: "ReplacingMergeTree"}, orderBy: "partition", shardBy: "partition"}}

// Rollups are the names of the rollups of migration 2, which the
// dashboard views read, in order.
func Rollups() []string {
	var names []string
	for _, r := range rollupTables() {
		names = append(names, r.name)
	}
	return names
}

// snapshotViews are the rollups and the change log that materialized
// views fill from every INSERT into message_read_snapshots, each view
// named for its table with _mv.
func snapshotViews() []rollupTable {
	return append(rollupTables(), snapshotChangesTable, firstRollupTable, hourlyRollupTable)
}

// SnapshotViews are the names of the tables of snapshotViews: those that
// materialized views fill from every INSERT into message_read_snapshots,
// each view named for its table with _mv.
func SnapshotViews() []string {
	var names []string
	for _, r := range snapshotViews() {
		names = append(names, r.name)
	}
	return names
}

// FillSelect is the SELECT that fills table, one of SnapshotViews, from
// the snapshot rows of from (a quoted, qualified table) that the WHERE
// clause where selects (empty for all): what its materialized view runs
// on every INSERT, and what a fold of the rows written before it runs.
func FillSelect(table, from, where string) string {
	for _, r := range snapshotViews() {
		if r.name == table {
			return r.selectFrom(from, where)
		}
	}
	panic("schema: no materialized view fills " + table + " from the snapshots")
}
