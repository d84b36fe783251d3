package schema

import (
	"encoding/binary"
	"fmt"
)

// The hourly resolution: each message's last row of each UTC hour, and
// each project's hour, its values and its reads gained, kept as long as
// READSYNC_RETAIN_HOURLY says, so that a dashboard charts an hour's
// resolution over ranges whose raw rows expired. It mirrors the daily
// resolution: the hourly rollup is filled by a materialized view from
// every INSERT into message_read_snapshots; the hour rollup and the hour
// gains rollup are refreshed after every write (package derived), with
// keys that grow with the rows seen.

// Names of the hourly resolution's tables and views.
const (
	HourlyRollup    = "message_read_hourly_rollup"
	HourRollup      = "project_read_hour_rollup"
	HourGainsRollup = "project_read_hour_gain_rollup"
	HourlyView      = "project_read_hourly"
	HourlyGainsView = "project_read_hourly_gains"
)

// HourOf is a snapshot's UTC hour: hours in the server's time zone would
// not be UTC's in a zone with a half-hour offset.
const HourOf = "toDateTime(intDiv(toUInt32(snapshot_at), 3600) * 3600)"

// hourlyRollupTable holds, once merged, one row per message and UTC hour:
// its last snapshot of the hour.
var hourlyRollupTable = rollupTable{
	TableDef: TableDef{name: HourlyRollup, columns: []ColumnDef{
		{"project_id", "Int64"}, {"hour", "DateTime"}, {"message_id", "Int64"}, {"hour_row", "AggregateFunction(max, String)"},
	}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "toYYYYMM(hour)", "(project_id, hour, message_id)")},
	fill: `SELECT project_id, ` + HourOf + ` AS hour, message_id, maxState(` + SnapshotRow + `) AS hour_row
FROM {from} {where}
GROUP BY project_id, hour, message_id`,
}

// hourRollupTable is the hour rollup: a project's hour as project_read_hourly
// shows it. A refresh writes the hour's values after its key (see
// dayrefresh.go) as one String, HourRow, whose maximum is the values of
// the highest key: the key has a fixed length, so the String compares as
// the key first. The day rollup keeps the same values as an argMax of a
// tuple, as release 0.4.0 created it; a maximum of a String merges in
// half the time (the per-snapshot panel over two days of hours of 500
// projects: 70 ms against 130 on 26.7, 70 against 90 on 18.16).
var hourRollupTable = TableDef{name: HourRollup, columns: []ColumnDef{
	{"project_id", "Int64"}, {"hour", "DateTime"}, {"hour_state", "AggregateFunction(max, String)"},
}, layout: hourRollupLayout()}

// Where HourRow's values begin, after the refresh key.
const (
	hourMessages = refreshKeyLen + 1
	hourReads    = hourMessages + 8
	hourTotal    = hourReads + 8
)

// HourRow is the hour rollup's String of a refresh: its key, then the
// messages, reads and total of the hour (UInt64 expressions) in bigEndian
// form.
func HourRow(key, messages, reads, total string) string {
	return fmt.Sprintf("concat(%s, %s, %s, %s)", key, bigEndian(messages), bigEndian(reads), bigEndian(total))
}

// HourRowOf is the HourRow of the key and values, as the server writes
// it: for a refresh computed in Go.
func HourRowOf(key string, messages, reads, total uint64) string {
	b := []byte(key)
	for _, v := range []uint64{messages, reads, total} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return string(b)
}

// hourGainsTable is the hour gains rollup: the gains of a project's
// snapshots summed per UTC hour, as the day gains rollup sums them per
// day (package derived's gaindays.go).
var hourGainsTable = TableDef{name: HourGainsRollup, columns: []ColumnDef{
	{"project_id", "Int64"}, {"hour", "DateTime"},
	{"hour_gain_state", "AggregateFunction(argMax, Tuple(UInt64, UInt64, Int64, UInt64), String)"},
}, layout: hourRollupLayout()}

// hourRollupLayout stores a rollup with a row per project and hour: by
// the month of its hour, in granules of hourGranularity.
func hourRollupLayout() layout {
	l := rollupLayout(engine{name: "AggregatingMergeTree"}, "toYYYYMM(hour)", "(project_id, hour)")
	l.granularity = hourGranularity
	return l
}

// hourGranularity is the index_granularity of the per-project hourly
// rollups. A dashboard reads the last hours of every project: with
// granules of 1 024 rows, a granule holds more than a month of hours of a
// project, and the read of a day of all projects reads every row (361 000
// at 500 projects and a month, 110 ms on 26.7); with 128, a granule holds
// five days, and the same read takes a fifth of the rows (76 000, 50 ms).
// A state is large (its refresh key and its values), so the index stays
// small beside it.
const hourGranularity = 128

// projectReadHourly is project_read_hourly: per project and UTC hour, the
// messages listed, their last reads and totals of the hour, summed.
func projectReadHourly(d DDL) string {
	hours := fmt.Sprintf(`SELECT project_id, hour, %s AS messages, %s AS reads, %s AS total
FROM
(
    SELECT project_id, hour, maxMerge(hour_state) AS hour_row
    FROM %s
    GROUP BY project_id, hour
)`, RowUInt64("hour_row", hourMessages), RowUInt64("hour_row", hourReads), RowUInt64("hour_row", hourTotal), d.Table(HourRollup))
	return "SELECT hour, project_id, nft, project_name, messages, reads, total, " + readRate + "\nFROM " + withProject(d, hours)
}

// projectReadHourlyGains is project_read_hourly_gains: the gains of a
// project's snapshots summed per UTC hour.
func projectReadHourlyGains(d DDL) string {
	hours := fmt.Sprintf(`SELECT
    project_id,
    hour,
    tupleElement(v, 1) AS snapshots,
    tupleElement(v, 2) AS new_messages,
    tupleElement(v, 3) AS reads_gained,
    tupleElement(v, 4) AS missed_ticks
FROM
(
    SELECT project_id, hour, argMaxMerge(hour_gain_state) AS v
    FROM %s
    GROUP BY project_id, hour
)`, d.Table(HourGainsRollup))
	return "SELECT hour, project_id, nft, project_name, snapshots, new_messages, reads_gained, missed_ticks\nFROM " + withProject(d, hours)
}

// hourlyViews are the views of the hourly resolution.
func hourlyViews(d DDL) []view {
	return []view{{HourlyView, projectReadHourly(d)}, {HourlyGainsView, projectReadHourlyGains(d)}}
}

// HourlyDDL is what migration 12 creates: the tables, the materialized
// view that fills the hourly rollup from snapshots, the table that holds
// the snapshot rows on each host (see chconn.Names.LocalName), and the
// views.
func HourlyDDL(d DDL, snapshots string) []string {
	var stmts []string
	for _, t := range []TableDef{hourlyRollupTable.TableDef, hourRollupTable, hourGainsTable} {
		stmts = append(stmts, d.CreateTable(t)...)
	}
	stmts = append(stmts, fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS\n%s",
		d.Table(HourlyRollup+"_mv"), d.OnCluster(), d.Local(HourlyRollup), hourlyRollupTable.selectFrom(snapshots, "")))
	for _, v := range hourlyViews(d) {
		stmts = append(stmts, d.CreateView(v.name, v.query))
	}
	return stmts
}
