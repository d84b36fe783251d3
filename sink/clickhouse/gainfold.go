package clickhouse

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
)

// migrateGains creates the gains rollup and the first-seen rollup with its
// materialized view, folds the history into the first-seen rollup, then
// creates the views. The gains of the history are computed by migration 7
// (migrateDerived), which a database upgraded from before this step runs
// right after it: release 0.3.0 computed them here, without the newest
// write's values that migration 7 adds. Run again, this step creates
// nothing new, and its fold changes nothing: the first-seen rollup keeps a
// minimum.
func migrateGains(ctx context.Context, m *migrator) error {
	d := m.ddl
	var stmts []string
	for _, t := range []tableDef{firstRollupTable.tableDef, gainsTable.def(), dayGainsTable} {
		stmts = append(stmts, d.createTable(t)...)
	}
	stmts = append(stmts, fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS\n%s",
		d.Table(firstRollup+"_mv"), d.OnCluster(), d.Local(firstRollup), firstRollupTable.selectFrom(d.Local(SnapshotsTable.name), "")))
	for _, q := range stmts {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	partitions, err := m.partitions(ctx, SnapshotsTable.name)
	if err != nil {
		return err
	}
	for _, p := range partitions {
		if err := m.exec(ctx, fmt.Sprintf("INSERT INTO %s %s", d.Table(firstRollup),
			firstRollupTable.selectFrom(d.Table(SnapshotsTable.name), "WHERE toYYYYMM(snapshot_at) = "+p))); err != nil {
			return fmt.Errorf("fold partition %s into %s: %w", p, firstRollup, err)
		}
	}
	for _, v := range gainsViews(d) {
		if err := m.exec(ctx, d.createView(v.name, v.query)); err != nil {
			return err
		}
	}
	return nil
}

// migrateDerived is migration 7: the derived rows become a function of
// the stored history that readsync can check and mend. It
//   - adds to message_read_snapshots the schedule that wrote each row, by
//     which reads gained count missed ticks (gainschedules.go), and keeps
//     the schedules release 0.3.0 counted the history's missed ticks by;
//   - adds to the gains rollup the newest write at each snapshot, which
//     project_read_snapshots shows from then on: a choice between
//     refreshes, where the summing rollup it read before counted a
//     repeated INSERT twice on servers without deduplication tokens;
//   - creates the change logs and the record of reconciles (changes.go,
//     reconcile.go), before the fold, so that what other processes write
//     meanwhile is reconciled after;
//   - computes the day rollup and the gains of the whole history again,
//     the gains in this release's form, and replaces
//     project_read_snapshots. Earlier releases left a day or a snapshot
//     stale for good when they died between a write and its refresh: the
//     upgrade mends those too.
//
// Each part is safe to run again: columns and tables are added when
// missing, the schedules kept are those of rows of release 0.3.0's form
// only, and a gains row computed again from the same rows has the key of
// the one stored, which is then not written.
func migrateDerived(ctx context.Context, m *migrator) error {
	d := m.ddl
	if err := m.addColumn(ctx, SnapshotsTable.name, "schedule", "String", "version"); err != nil {
		return err
	}
	after := "gain_schedule"
	for _, col := range gainColumnsSince7 {
		if err := m.addColumn(ctx, gainsRollup, col, "UInt64", after); err != nil {
			return err
		}
		after = col
	}
	var stmts []string
	for _, t := range []tableDef{legacySchedulesTable, reconcilesTable} {
		stmts = append(stmts, d.createTable(t)...)
	}
	for _, q := range append(stmts, createChangeLogs(d)...) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	if err := fillLegacySchedules(ctx, m); err != nil {
		return err
	}
	if err := foldDays(ctx, m); err != nil {
		return err
	}
	if err := m.ch.foldGains(ctx, m.log, m.held); err != nil {
		return err
	}
	for _, q := range d.replaceView(view{snapshotView, snapshotsFromGains(d)}) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// FoldGains computes the gains of every snapshot in the database from the
// whole history, a group of projects at a time: what migration 7 does for
// the history written before it, and what a benchmark that writes its
// history with INSERT … SELECT runs after. Running it again changes
// nothing the views show.
func (c *ClickHouse) FoldGains(ctx context.Context) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	return c.foldGains(ctx, c.conn.Log(), func(context.Context) error { return nil })
}

// foldGainsRows bounds the snapshot rows a step of the fold reads, and so
// its memory on the server (the rows are sorted) and in readsync (a sum
// per project snapshot).
const foldGainsRows = 4_000_000

// foldGains computes the gains of every snapshot a group of projects at a
// time, asking held before each group whether it may go on.
func (c *ClickHouse) foldGains(ctx context.Context, log *slog.Logger, held func(context.Context) error) error {
	steps, err := c.foldSteps(ctx, nil)
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
		n, err := c.foldStep(ctx, projects)
		if err != nil {
			return err
		}
		log.Info("computed reads gained", "projects", len(projects), "snapshots", n, "done", i+1, "of", len(steps),
			"duration_ms", time.Since(start).Milliseconds())
	}
	return nil
}

// foldGainsOf computes the gains of every snapshot of projects.
func (c *ClickHouse) foldGainsOf(ctx context.Context, projects []int64) error {
	steps, err := c.foldSteps(ctx, projects)
	if err != nil {
		return err
	}
	for _, step := range steps {
		if _, err := c.foldStep(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// foldSteps groups the projects with snapshots (of only, unless nil) so
// that each group holds about foldGainsRows rows at most.
func (c *ClickHouse) foldSteps(ctx context.Context, only []int64) ([][]int64, error) {
	// Every write of a project counts here, replays too: an estimate of
	// the rows a step reads, from a table that is small to read.
	q := fmt.Sprintf("SELECT project_id, sum(write_messages) FROM %s GROUP BY project_id ORDER BY project_id", c.ddl.Table(snapshotRollup))
	if only != nil {
		pt, err := chconn.ProjectsExt("folded", only)
		if err != nil {
			return nil, err
		}
		ctx = chconn.WithExternal(ctx, pt)
		q = fmt.Sprintf("SELECT project_id, sum(write_messages) FROM %s WHERE %s GROUP BY project_id ORDER BY project_id",
			c.ddl.Table(snapshotRollup), chconn.InExt("project_id", "folded"))
	}
	var (
		steps [][]int64
		step  []int64
		n     uint64
	)
	err := chconn.QueryEach(ctx, c.conn, q, func(rows driver.Rows) error {
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
		return nil, c.conn.Redact(fmt.Errorf("fold reads gained: count rows per project: %w", err))
	}
	if len(step) > 0 {
		steps = append(steps, step)
	}
	return steps, nil
}

// foldStep computes the gains of every snapshot of projects from their
// whole history, and returns how many snapshots it computed.
func (c *ClickHouse) foldStep(ctx context.Context, projects []int64) (int, error) {
	scan := newGainScan(nil, true)
	err := c.readSnapshots(ctx, projects, nil, 0, math.MaxUint32, func(r scannedRow) { scan.row(r.key, r.row) })
	scan.finish()
	if err != nil {
		return 0, c.conn.Redact(fmt.Errorf("fold reads gained of projects %d to %d: %w", projects[0], projects[len(projects)-1], err))
	}
	out, err := c.gainRows(ctx, scan.sums)
	if err != nil {
		return 0, c.conn.Redact(fmt.Errorf("fold reads gained of projects %d to %d: %w", projects[0], projects[len(projects)-1], err))
	}
	days := map[chconn.ProjectDay]bool{}
	for t := range scan.sums {
		days[chconn.ProjectDay{Project: t.project, Day: chconn.DayOf(t.at)}] = true
	}
	if _, err := c.storeGains(ctx, out, days); err != nil {
		return 0, err
	}
	return len(out), nil
}
