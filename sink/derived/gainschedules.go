package derived

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// Which schedule's ticks a snapshot's interval is judged by: that of the
// pass that wrote the project's newest write at the snapshot, as its rows
// record it. A backfill belongs to no schedule, and its snapshots count no
// missed ticks; nor do rows written before the rows recorded their
// schedule, but where the release that wrote them counted missed ticks
// (0.3.0, which kept the schedule only with the gains it computed):
// migration 7 kept that schedule in schema.LegacySchedules, and it stands
// for the rows' own.
//
// So a snapshot's schedule is a function of the rows at it: another write
// there can change it only by being newer, which also raises the
// snapshot's versions and so its gains key.

// snapshotSchedules returns the schedule of each snapshot of set that has
// one (see above).
func (h *History) snapshotSchedules(ctx context.Context, set chconn.SnapshotSet) (map[gainTarget]string, error) {
	out := map[gainTarget]string{}
	if set.Len() == 0 {
		return out, nil
	}
	tables, cond, err := snapshotCondition(set, "scheduled")
	if err != nil {
		return nil, err
	}
	read := func(q, what string) error {
		err := chconn.QueryEach(chconn.WithExternal(ctx, tables...), h.conn, q, func(rows driver.Rows) error {
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
		h.names.Table(schema.SnapshotsTable.Name()), cond), schema.SnapshotsTable.Name()); err != nil {
		return nil, err
	}
	if len(out) == set.Len() {
		return out, nil
	}
	if err := read(fmt.Sprintf("SELECT project_id, toUInt32(snapshot_at), any(schedule) FROM %s WHERE %s GROUP BY project_id, snapshot_at",
		h.names.Table(schema.LegacySchedules), cond), schema.LegacySchedules); err != nil {
		return nil, err
	}
	return out, nil
}
