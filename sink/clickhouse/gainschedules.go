package clickhouse

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
)

// Which schedule's ticks a snapshot's interval is judged by: that of the
// pass that wrote the project's newest write at the snapshot, as its rows
// record it. A backfill belongs to no schedule, and its snapshots count no
// missed ticks; nor do rows written before the rows recorded their
// schedule, but where the release that wrote them counted missed ticks
// (0.3.0, which kept the schedule only with the gains it computed):
// migration 7 kept that schedule in legacySchedulesTable, and it stands
// for the rows' own.
//
// So a snapshot's schedule is a function of the rows at it: another write
// there can change it only by being newer, which also raises the
// snapshot's versions and so its gains key.

// legacySchedules is the table of the schedules release 0.3.0 counted
// snapshots' missed ticks by. Migration 7 fills it once; nothing writes it
// after.
const legacySchedules = "snapshot_schedules"

var legacySchedulesTable = tableDef{name: legacySchedules, columns: []columnDef{
	{"project_id", "Int64"}, {"snapshot_at", "DateTime"}, {"schedule", "String"},
}, layout: layout{engine: engine{name: "ReplacingMergeTree"}, partitionBy: "toYYYYMM(snapshot_at)", orderBy: "(project_id, snapshot_at)", shardBy: "project_id"}}

// fillLegacySchedules copies into legacySchedulesTable the schedule of
// every snapshot whose gains release 0.3.0 computed with one: the highest
// of its rows with a key of that release's form (which starts with 0; see
// gainKeyFormat). Run again, it copies the same: a key of this release's
// form never counts.
func fillLegacySchedules(ctx context.Context, m *migrator) error {
	q := fmt.Sprintf(`INSERT INTO %s (project_id, snapshot_at, schedule)
SELECT project_id, snapshot_at, legacy_schedule
FROM
(
    SELECT project_id, snapshot_at, argMax(gain_schedule, gain_key) AS legacy_schedule
    FROM %s
    WHERE substring(gain_key, 1, 1) = '0'
    GROUP BY project_id, snapshot_at
)
WHERE legacy_schedule != ''`, m.ddl.Table(legacySchedules), m.ddl.Table(gainsRollup))
	if err := m.exec(ctx, q); err != nil {
		return fmt.Errorf("keep the schedules of the gains computed before: %w", err)
	}
	return nil
}

// snapshotSchedules returns the schedule of each snapshot of set that has
// one (see above).
func (c *ClickHouse) snapshotSchedules(ctx context.Context, set chconn.SnapshotSet) (map[gainTarget]string, error) {
	out := map[gainTarget]string{}
	if set.Len() == 0 {
		return out, nil
	}
	tables, cond, err := snapshotCondition(set, "scheduled")
	if err != nil {
		return nil, err
	}
	read := func(q, what string) error {
		err := chconn.QueryEach(chconn.WithExternal(ctx, tables...), c.conn, q, func(rows driver.Rows) error {
			var (
				t gainTarget
				s string
			)
			if err := rows.Scan(&t.project, &t.at, &s); err != nil {
				return err
			}
			if s != "" && set.Has(t.project, t.at) && out[t] == "" {
				out[t] = s
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read the schedules of %d snapshots from %s: %w", set.Len(), what, err)
		}
		return nil
	}
	if err := read(fmt.Sprintf("SELECT project_id, toUInt32(snapshot_at), argMax(schedule, version) FROM %s WHERE %s GROUP BY project_id, snapshot_at",
		c.ddl.Table(SnapshotsTable.name), cond), SnapshotsTable.name); err != nil {
		return nil, err
	}
	if len(out) == set.Len() {
		return out, nil
	}
	if err := read(fmt.Sprintf("SELECT project_id, toUInt32(snapshot_at), any(schedule) FROM %s WHERE %s GROUP BY project_id, snapshot_at",
		c.ddl.Table(legacySchedules), cond), legacySchedules); err != nil {
		return nil, err
	}
	return out, nil
}
