package schema

import (
	"fmt"
	"strings"

	"github.com/readsync/readsync/sink/chconn"
)

// The day rollup holds one row per project and UTC day once merged: the
// values project_read_daily shows, computed from the daily rollup by a
// refresh after every write. A materialized view cannot keep it: a
// day's value depends on rows written before the INSERT it sees.
//
// Each refresh stores its values with a key that grows with the rows the
// refresh saw, and the view keeps the values of the highest key, so
// refreshes may land in any order. For the set of messages of the day and
// each one's last (snapshot_at, version) of the day, more rows can only add
// messages or move a message's last snapshot later, so the key is the tuple
// (messages, Σ snapshot_at, Σ version / 2^32, Σ version mod 2^32): if a
// later refresh saw more, the first component that differs is larger; if it
// saw the same last snapshots, its values are the same. Each sum is padded
// to 20 digits so that the key compares as a String, and has a fixed
// length (refreshKeyLen).
var dayRollupTable = TableDef{name: DayRollup, columns: []ColumnDef{
	{"project_id", "Int64"}, {"day", "Date"}, {"day_state", "AggregateFunction(argMax, Tuple(UInt64, UInt64, UInt64), String)"},
}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "toYYYYMM(day)", "(project_id, day)")}

// refreshKeyLen is the length of a refresh key: four sums of 20 digits.
const refreshKeyLen = 80

// DayRefresh returns the INSERT that computes the day rollup's rows from
// the daily rollup for the (project, day) pairs that where selects.
func DayRefresh(n chconn.Names, where string) string {
	return periodRefresh(DDL{Names: n}, DayRollup, DailyRollup, "day", where, "argMaxState(day_values, refresh_key)")
}

// HourRefresh returns the INSERT that computes the hour rollup's rows
// (hourly.go) from the hourly rollup for the (project, hour) pairs that
// where selects: as DayRefresh does for days, each as its HourRow.
func HourRefresh(n chconn.Names, where string) string {
	return periodRefresh(DDL{Names: n}, HourRollup, HourlyRollup, "hour", where, "maxState("+
		HourRow("refresh_key", "tupleElement(hour_values, 1)", "tupleElement(hour_values, 2)", "tupleElement(hour_values, 3)")+")")
}

// periodRefresh is the refresh of the rollup target of a project's
// period, named by its column (day, hour), from the rollup source of the
// messages' last rows of each; state aggregates the period's values (a
// tuple, {period}_values) and their refresh_key into the target's state.
func periodRefresh(d DDL, target, source, period, where, state string) string {
	return strings.ReplaceAll(fmt.Sprintf(dayRefreshSQL, d.Table(target), d.Table(source), where,
		RowUInt64("message_row", RowReadCount), RowUInt64("message_row", RowTotal),
		RowUInt64("message_row", RowSnapshotAt), RowUInt64("message_row", RowVersion), state), "{period}", period)
}

const dayRefreshSQL = `INSERT INTO %[1]s (project_id, {period}, {period}_state)
SELECT project_id, {period}, %[8]s
FROM
(
    SELECT
        project_id,
        {period},
        (count(), sum(%[4]s), sum(%[5]s)) AS {period}_values,
        concat(
            toString(count() + 10000000000000000000),
            toString(sum(%[6]s) + 10000000000000000000),
            toString(sum(intDiv(%[7]s, 4294967296)) + 10000000000000000000),
            toString(sum(%[7]s %% 4294967296) + 10000000000000000000)) AS refresh_key
    FROM
    (
        SELECT project_id, {period}, message_id, maxMerge({period}_row) AS message_row
        FROM %[2]s
        %[3]s
        GROUP BY project_id, {period}, message_id
    )
    GROUP BY project_id, {period}
)
GROUP BY project_id, {period}`
