package sink

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// migrateGains creates the gains rollup and the first-seen rollup with its
// materialized view, folds the history into both, then creates the views.
// Run again, it creates nothing new, and its folds change nothing the
// views show: the first-seen rollup keeps a minimum, and the gains of a
// snapshot computed again from the same rows have the same key.
func migrateGains(ctx context.Context, m *migrator) error {
	d := m.ddl
	var stmts []string
	for _, t := range []tableDef{firstRollupTable.tableDef, gainsTable.def(), dayGainsTable} {
		stmts = append(stmts, d.createTable(t)...)
	}
	stmts = append(stmts, fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS\n%s",
		d.table(firstRollup+"_mv"), d.onCluster(), d.local(firstRollup), firstRollupTable.selectFrom(d.local(snapshotsTable.name), "")))
	for _, q := range stmts {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	partitions, err := m.partitions(ctx, snapshotsTable.name)
	if err != nil {
		return err
	}
	for _, p := range partitions {
		if err := m.exec(ctx, fmt.Sprintf("INSERT INTO %s %s", d.table(firstRollup),
			firstRollupTable.selectFrom(d.table(snapshotsTable.name), "WHERE toYYYYMM(snapshot_at) = "+p))); err != nil {
			return fmt.Errorf("fold partition %s into %s: %w", p, firstRollup, err)
		}
	}
	if err := m.ch.foldGains(ctx, m.log); err != nil {
		return err
	}
	for _, v := range gainsViews(d) {
		if err := m.exec(ctx, d.createView(v.name, v.query)); err != nil {
			return err
		}
	}
	return nil
}

// FoldGains computes the gains of every snapshot in the database from the
// whole history, a group of projects at a time: what the migration that
// creates the gains rollup does for the history written before it, and
// what a benchmark that writes its history with INSERT … SELECT runs after.
// Running it again changes nothing the views show.
func (c *ClickHouse) FoldGains(ctx context.Context) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	return c.foldGains(ctx, c.log)
}

// foldGainsRows bounds the snapshot rows a step of the fold reads, and so
// its memory on the server (the rows are sorted) and in readsync (a sum
// per project snapshot).
const foldGainsRows = 4_000_000

func (c *ClickHouse) foldGains(ctx context.Context, log *slog.Logger) error {
	// Every write of a project counts here, replays too: an estimate of
	// the rows a step reads, from a table that is small to read.
	q := fmt.Sprintf("SELECT project_id, sum(write_messages) FROM %s GROUP BY project_id ORDER BY project_id", c.ddl.table(snapshotRollup))
	rows, err := c.conn.Query(ctx, q)
	if err != nil {
		return c.redact(fmt.Errorf("fold reads gained: count rows per project: %w", err))
	}
	var (
		steps [][]int64
		step  []int64
		n     uint64
	)
	for rows.Next() {
		var (
			p    int64
			msgs uint64
		)
		if err := rows.Scan(&p, &msgs); err != nil {
			rows.Close()
			return c.redact(fmt.Errorf("fold reads gained: count rows per project: %w", err))
		}
		if len(step) > 0 && n+msgs > foldGainsRows {
			steps, step, n = append(steps, step), nil, 0
		}
		step, n = append(step, p), n+msgs
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return c.redact(fmt.Errorf("fold reads gained: count rows per project: %w", err))
	}
	if len(step) > 0 {
		steps = append(steps, step)
	}
	if len(steps) > 0 {
		log.Info("computing reads gained over the snapshot history", "steps", len(steps))
	}
	for i, projects := range steps {
		start := time.Now()
		scan := newGainScan(nil, true)
		err := c.readSnapshots(ctx, projects, nil, 0, math.MaxUint32, func(r scannedRow) { scan.row(r.key, r.row) })
		scan.finish()
		if err != nil {
			return c.redact(fmt.Errorf("fold reads gained of projects %d to %d: %w", projects[0], projects[len(projects)-1], err))
		}
		out, err := c.gainRows(ctx, scan.sums, func(gainTarget) string { return "" })
		if err != nil {
			return c.redact(fmt.Errorf("fold reads gained of projects %d to %d: %w", projects[0], projects[len(projects)-1], err))
		}
		if err := c.storeGains(ctx, out); err != nil {
			return err
		}
		log.Info("computed reads gained", "projects", len(projects), "snapshots", len(out), "done", i+1, "of", len(steps),
			"duration_ms", time.Since(start).Milliseconds())
	}
	return nil
}
