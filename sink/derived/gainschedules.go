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
// snapshot's versions and so its gains key. A refresh reads it in the scan
// that reads the rows (gainScan.take), every row's schedule with it.

// legacySchedules returns the schedule release 0.3.0 kept for each
// snapshot of set that it kept one for: what a snapshot whose rows record
// none is judged by.
func (h *History) legacySchedules(ctx context.Context, set chconn.SnapshotSet) (map[gainTarget]string, error) {
	out := map[gainTarget]string{}
	if set.Len() == 0 {
		return out, nil
	}
	tables, cond, err := h.names.SnapshotsIn("scheduled", set)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf("SELECT project_id, toUInt32(snapshot_at), any(schedule) FROM %s WHERE %s GROUP BY project_id, snapshot_at",
		h.names.Table(schema.LegacySchedules), cond)
	err = chconn.QueryEach(chconn.WithExternal(ctx, tables...), h.conn, q, func(rows driver.Rows) error {
		var (
			t gainTarget
			s string
		)
		if err := rows.Scan(&t.project, &t.at, &s); err != nil {
			return err
		}
		if s != "" && set.Has(t.project, t.at) {
			out[t] = s
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the schedules of %d snapshots from %s: %w", set.Len(), schema.LegacySchedules, err)
	}
	return out, nil
}
