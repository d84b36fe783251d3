package derived

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// A snapshot written before a project's latest (a backfill of a past day,
// a replay, an import) becomes the previous row of each of its messages'
// next rows, whose gains change with it. Finding those reads, per group of
// projects, their rows from the first such snapshot to the project's next
// snapshot after the last: what was written and one snapshot more. A
// message whose next row lies beyond is looked up by itself.

// addSuccessors adds to targets, for each snapshot (p, s) of written that
// has a later snapshot, each of s's messages' next snapshot: s is now its
// previous one. Writes in order, the daemon's, have none: the latest-value
// rollup, a row per message, says so. It returns the newest snapshot of
// each project of written, from the same rollup.
func (h *History) addSuccessors(ctx context.Context, targets, written chconn.SnapshotSet) (map[int64]uint32, error) {
	latest, err := h.latestOfMessages(ctx, written.Projects())
	if err != nil {
		return nil, err
	}
	newest := map[int64]uint32{}
	for k, at := range latest {
		newest[k.project] = max(newest[k.project], at)
	}
	later := chconn.SnapshotSet{}
	for p, ats := range written {
		for at := range ats {
			if at < newest[p] {
				later.Add(p, at)
			}
		}
	}
	for _, g := range groupByDays(later) {
		if err := h.addGroupSuccessors(ctx, targets, later, latest, g); err != nil {
			return nil, fmt.Errorf("next snapshots of %d written snapshots: %w", later.Len(), err)
		}
	}
	return newest, nil
}

// addGroupSuccessors adds the next snapshots of the later snapshots of
// the group g's projects to targets; latest holds each message's latest
// snapshot.
func (h *History) addGroupSuccessors(ctx context.Context, targets, later chconn.SnapshotSet, latest map[msgKey]uint32, g dayGroup) error {
	next, err := h.nextSnapshots(ctx, g.projects, g.to)
	if err != nil {
		return err
	}
	end := g.to
	for _, at := range next {
		end = max(end, at)
	}
	// Each message's snapshots in the window, in order: the one after a
	// later snapshot is its next row; a message whose last snapshot there
	// is one and that has rows after the window is looked up beyond it.
	beyond := map[msgKey]bool{}
	pt, err := chconn.ProjectsExt("later", g.projects)
	if err != nil {
		return err
	}
	q := fmt.Sprintf(`SELECT project_id, message_id, arraySort(groupUniqArray(toUInt32(snapshot_at)))
FROM %s
WHERE %s AND snapshot_at >= %s AND snapshot_at <= %s
GROUP BY project_id, message_id`, h.names.Table(schema.SnapshotsTable.Name()), h.names.InExt("project_id", "later"), chconn.DateTime(g.from), chconn.DateTime(end))
	err = chconn.QueryEach(chconn.WithExternal(ctx, pt), h.conn, q, func(rows driver.Rows) error {
		var (
			k   msgKey
			ats []uint32
		)
		if err := rows.Scan(&k.project, &k.message, &ats); err != nil {
			return err
		}
		for i, at := range ats {
			switch {
			case !later.Has(k.project, at):
			case i+1 < len(ats):
				targets.Add(k.project, ats[i+1])
			case latest[k] > end:
				beyond[k] = true
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the rows from %s to %s: %w", sink.Time(g.from), sink.Time(end), err)
	}
	if len(beyond) == 0 {
		return nil
	}
	found, err := h.firstRowsAfter(ctx, beyond, end)
	if err != nil {
		return err
	}
	for k, at := range found {
		targets.Add(k.project, at)
	}
	return nil
}
