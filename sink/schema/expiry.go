package schema

import (
	"fmt"
	"strings"
)

// History in bounded space: the tables whose rows describe a time expire
// by resolution, each after its own retention, a whole partition at a
// time (package expiry drops them). Every such table is partitioned by the
// month of its time column, so what is kept beyond a retention is at most
// a month. The tables of current state (projects, messages, the latest,
// first-seen and tip rollups, name_successes) never expire.

// Resolution is how finely a table's rows describe the history; each
// has its own retention.
type Resolution string

// The resolutions.
const (
	// Raw is a row per snapshot: the snapshot rows, the per-snapshot
	// rollups, the change logs, and the records the gains' missed ticks
	// and the names' health read (sync_runs, reconciles, name_failures,
	// and name_failure_hour_rollup, of which name_health reads a day),
	// which must stay at least as long, and the record of refreshes the
	// reconcile reads with the change logs.
	Raw Resolution = "raw"
	// Hourly is a row per message or project and UTC hour.
	Hourly Resolution = "hourly"
	// Daily is a row per message or project and UTC day.
	Daily Resolution = "daily"
)

// Resolutions lists the resolutions, finest first: a coarser one keeps
// its rows at least as long as a finer one.
func Resolutions() []Resolution { return []Resolution{Raw, Hourly, Daily} }

// ExpiringTable is a table whose partitions expire.
type ExpiringTable struct {
	Name       string
	Resolution Resolution
	// Column is the time column the table is partitioned by the month
	// of; Date is set when it is a Date rather than a DateTime.
	Column string
	Date   bool
}

// Expiries is the record of every partition expiry dropped, and of the
// runs of the daemons' expiry loops.
const Expiries = "expiries"

// expiriesTable has a row per partition dropped (or about to be: the row
// is written first, so that a drop is never unrecorded), and a row per run
// of a daemon's expiry with an empty table, by which the daemons leave the
// runs to one of them. kept_from is the time from which on the
// resolution's rows are all kept: readers of the derived history take
// the derived rows before it as given, since the rows they were computed
// from are gone. It never expires: a row per partition and month.
var expiriesTable = TableDef{name: Expiries, columns: []ColumnDef{
	{"started_at", "DateTime"}, {"owner", "String"}, {"resolution", "String"}, {"table", "String"},
	{"partition", "String"}, {"kept_from", "DateTime"}, {"rows", "UInt64"}, {"bytes", "UInt64"},
}, layout: layout{engine: engine{name: "MergeTree"}, orderBy: "started_at", shardBy: "toUInt32(started_at)"}}

// expiringDefs are the tables that expire, by resolution. A test holds
// every table the migrations create partitioned by month to this list
// (TestEveryPartitionedTableExpires).
func expiringDefs() []struct {
	def TableDef
	res Resolution
} {
	return []struct {
		def TableDef
		res Resolution
	}{
		{SnapshotsTable.Def(), Raw},
		{rollupByName(SnapshotRollup), Raw},
		{GainsTable.Def(), Raw},
		{snapshotChangesTable.TableDef, Raw},
		{tickChangesTable.TableDef, Raw},
		{RunsTable.Def(), Raw},
		{reconcilesTable, Raw},
		{legacySchedulesTable, Raw},
		{NameFailuresTable.Def(), Raw},
		{nameFailureHoursTable.TableDef, Raw},
		{refreshesTable, Raw},
		{hourlyRollupTable.TableDef, Hourly},
		{hourRollupTable, Hourly},
		{hourGainsTable, Hourly},
		{rollupByName(DailyRollup), Daily},
		{dayRollupTable, Daily},
		{dayGainsTable, Daily},
		{ageRollupTable.TableDef, Daily},
	}
}

// rollupByName is the rollup table of that name.
func rollupByName(name string) TableDef {
	for _, r := range rollupTables() {
		if r.name == name {
			return r.TableDef
		}
	}
	panic("schema: no rollup " + name)
}

// ExpiringTables lists the tables whose partitions expire, with their
// resolution and time column, raw first.
func ExpiringTables() []ExpiringTable {
	var out []ExpiringTable
	for _, e := range expiringDefs() {
		col, ok := strings.CutPrefix(e.def.layout.partitionBy, "toYYYYMM(")
		col, closed := strings.CutSuffix(col, ")")
		if !ok || !closed {
			panic(fmt.Sprintf("schema: %s is not partitioned by month: %q", e.def.name, e.def.layout.partitionBy))
		}
		t := ExpiringTable{Name: e.def.name, Resolution: e.res, Column: col}
		for _, c := range e.def.columns {
			if c.Name == col {
				t.Date = c.Type == "Date"
			}
		}
		out = append(out, t)
	}
	return out
}

// ExpiriesDDL is what migration 11 creates: the record of expiry.
func ExpiriesDDL(d DDL) []string { return d.CreateTable(expiriesTable) }
