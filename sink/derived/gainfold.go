package derived

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// FoldGains computes the gains of every snapshot in the database of c
// from the whole history, a group of projects at a time, reporting its
// progress to log and asking held before each group whether it may go on:
// what migration 7 does for the history written before it (it is the
// migrate.GainsFolder the migrations are given), and what a benchmark that
// writes its history with INSERT … SELECT runs after. Running it again
// changes nothing the views show.
func FoldGains(ctx context.Context, c *chconn.Conn, log *slog.Logger, held func(context.Context) error) error {
	h := New(c)
	// Migration 7 runs it before migration 12 creates the hourly
	// resolution, which folds the hours' gains itself.
	n, err := chconn.QueryColumn[uint64](ctx, c, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", c.Names().Database(), schema.HourGainsRollup)
	if err != nil {
		return h.conn.Redact(fmt.Errorf("fold reads gained: look for %s: %w", schema.HourGainsRollup, err))
	}
	if n[0] == 0 {
		h.gainPeriods = []chconn.Period{chconn.Day}
	}
	// Migration 15 comes later still: before it, no tips and no record
	// of refreshes.
	n, err = chconn.QueryColumn[uint64](ctx, c, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", c.Names().Database(), schema.Refreshes)
	if err != nil {
		return h.conn.Redact(fmt.Errorf("fold reads gained: look for %s: %w", schema.Refreshes, err))
	}
	h.untipped = n[0] == 0
	return h.foldHistory(ctx, log, held)
}

// foldGainsRows bounds the snapshot rows a step of the fold reads, and so
// its memory on the server (the rows are sorted) and in readsync (a sum
// per project snapshot).
const foldGainsRows = 4_000_000

// foldHistory computes the gains of every snapshot a group of projects at a
// time, asking held before each group whether it may go on.
func (h *History) foldHistory(ctx context.Context, log *slog.Logger, held func(context.Context) error) error {
	steps, err := h.foldSteps(ctx, nil)
	if err != nil {
		return err
	}
	if len(steps) > 0 {
		log.Info("computing reads gained over the snapshot history", "steps", len(steps))
	}
	for i, projects := range steps {
		if err := held(ctx); err != nil {
			return err
		}
		start := time.Now()
		n, err := h.foldStep(ctx, projects, nil)
		if err != nil {
			return err
		}
		log.Info("computed reads gained", "projects", len(projects), "snapshots", n, "done", i+1, "of", len(steps),
			"duration_ms", time.Since(start).Milliseconds())
	}
	return nil
}

// foldGainsOf computes the gains of every snapshot of projects but those
// of given, whose gains were computed from rows that expired.
func (h *History) foldGainsOf(ctx context.Context, projects []int64, given chconn.SnapshotSet) error {
	steps, err := h.foldSteps(ctx, projects)
	if err != nil {
		return err
	}
	for _, step := range steps {
		if _, err := h.foldStep(ctx, step, given); err != nil {
			return err
		}
	}
	return nil
}

// foldSteps groups the projects with snapshots (of only, unless nil) so
// that each group holds about foldGainsRows rows at most.
func (h *History) foldSteps(ctx context.Context, only []int64) ([][]int64, error) {
	// Every write of a project counts here, replays too: an estimate of
	// the rows a step reads, from a table that is small to read.
	q := fmt.Sprintf("SELECT project_id, sum(write_messages) FROM %s GROUP BY project_id ORDER BY project_id", h.names.Table(schema.SnapshotRollup))
	if only != nil {
		pt, err := chconn.ProjectsExt("folded", only)
		if err != nil {
			return nil, err
		}
		ctx = chconn.WithExternal(ctx, pt)
		q = fmt.Sprintf("SELECT project_id, sum(write_messages) FROM %s WHERE %s GROUP BY project_id ORDER BY project_id",
			h.names.Table(schema.SnapshotRollup), h.names.InExt("project_id", "folded"))
	}
	var (
		steps [][]int64
		step  []int64
		n     uint64
	)
	err := chconn.QueryEach(ctx, h.conn, q, func(rows driver.Rows) error {
		var (
			p    int64
			msgs uint64
		)
		if err := rows.Scan(&p, &msgs); err != nil {
			return err
		}
		if len(step) > 0 && n+msgs > foldGainsRows {
			steps, step, n = append(steps, step), nil, 0
		}
		step, n = append(step, p), n+msgs
		return nil
	})
	if err != nil {
		return nil, h.conn.Redact(fmt.Errorf("fold reads gained: count rows per project: %w", err))
	}
	if len(step) > 0 {
		steps = append(steps, step)
	}
	return steps, nil
}

// foldStep computes the gains of every snapshot of projects from their
// whole history but those of given, and returns how many snapshots it
// computed.
func (h *History) foldStep(ctx context.Context, projects []int64, given chconn.SnapshotSet) (n int, err error) {
	err = h.recomputing(ctx, newRefreshID(), projects, func() error {
		n, err = h.foldProjects(ctx, projects, given)
		return err
	})
	return n, err
}

// foldProjects is foldStep, unrecorded.
func (h *History) foldProjects(ctx context.Context, projects []int64, given chconn.SnapshotSet) (int, error) {
	scan := newGainScan(nil, true)
	err := h.readSnapshots(ctx, projects, 0, math.MaxUint32, func(r scannedRow) { scan.take(r) })
	scan.finish()
	if err != nil {
		return 0, h.conn.Redact(fmt.Errorf("fold reads gained of projects %d to %d: %w", projects[0], projects[len(projects)-1], err))
	}
	out, err := h.gainRows(ctx, scan.sums, scan.writes)
	if err != nil {
		return 0, h.conn.Redact(fmt.Errorf("fold reads gained of projects %d to %d: %w", projects[0], projects[len(projects)-1], err))
	}
	out = slices.DeleteFunc(out, func(r schema.GainRow) bool { return given.Has(r.ProjectID, uint32(r.SnapshotAt.Unix())) })
	periods := chconn.SnapshotSet{}
	newest := map[int64]uint32{}
	for t := range scan.sums {
		periods.Add(t.project, t.at)
		newest[t.project] = max(newest[t.project], t.at)
	}
	if _, err := h.storeGains(ctx, out, periods, newest); err != nil {
		return 0, err
	}
	return len(out), nil
}
