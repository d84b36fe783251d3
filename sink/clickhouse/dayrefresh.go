package clickhouse

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/readsync/readsync/sink/chconn"
)

// The day rollup holds one row per project and UTC day once merged: the
// values project_read_daily shows, computed from the daily rollup by
// refreshDays after every write. A materialized view cannot keep it: a
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
// to 20 digits so that the key compares as a String.
var dayRollupTable = tableDef{name: dayRollup, columns: []columnDef{
	{"project_id", "Int64"}, {"day", "Date"}, {"day_state", "AggregateFunction(argMax, Tuple(UInt64, UInt64, UInt64), String)"},
}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "toYYYYMM(day)", "(project_id, day)")}

// dayRefresh returns the INSERT that computes the day rollup's rows from
// the daily rollup for the (project, day) pairs that where selects.
func dayRefresh(d ddl, where string) string {
	return fmt.Sprintf(dayRefreshSQL, d.Table(dayRollup), d.Table(dailyRollup), where,
		rowUInt64("message_row", rowReadCount), rowUInt64("message_row", rowTotal),
		rowUInt64("message_row", rowSnapshotAt), rowUInt64("message_row", rowVersion))
}

const dayRefreshSQL = `INSERT INTO %[1]s (project_id, day, day_state)
SELECT project_id, day, argMaxState(day_values, refresh_key)
FROM
(
    SELECT
        project_id,
        day,
        (count(), sum(%[4]s), sum(%[5]s)) AS day_values,
        concat(
            toString(count() + 10000000000000000000),
            toString(sum(%[6]s) + 10000000000000000000),
            toString(sum(intDiv(%[7]s, 4294967296)) + 10000000000000000000),
            toString(sum(%[7]s %% 4294967296) + 10000000000000000000)) AS refresh_key
    FROM
    (
        SELECT project_id, day, message_id, maxMerge(day_row) AS message_row
        FROM %[2]s
        %[3]s
        GROUP BY project_id, day, message_id
    )
    GROUP BY project_id, day
)
GROUP BY project_id, day`

// refreshDays recomputes the day rollup for days.
func (c *ClickHouse) refreshDays(ctx context.Context, days map[chconn.ProjectDay]bool) error {
	if len(days) == 0 {
		return nil
	}
	projects := map[int64]bool{}
	for pd := range days {
		projects[pd.Project] = true
	}
	pt, err := chconn.ProjectsExt("day_projects", slices.Sorted(maps.Keys(projects)))
	if err != nil {
		return err
	}
	dt, err := chconn.DaysExt("days", days)
	if err != nil {
		return err
	}
	// The projects let the daily rollup's primary key narrow the read;
	// the pairs make it exact.
	where := "WHERE " + chconn.InExt("project_id", "day_projects") + " AND " + chconn.InExt("project_id, day", "days")
	if err := c.conn.Exec(chconn.WithExternal(c.conn.SyncInserts(ctx), pt, dt), dayRefresh(c.ddl, where)); err != nil {
		return c.conn.Redact(fmt.Errorf("refresh %d project days of %s: %w", len(days), dayRollup, err))
	}
	return nil
}
