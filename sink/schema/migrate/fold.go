package migrate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// migrateRollups is the migration that makes the views read the rollups.
// It creates each rollup and its materialized view, folds the existing
// history into them a partition at a time, and only then replaces the
// views, so the old views answer until the fold is done.
//
// Like every step it may run again after a crash, or beside itself in
// another process: everything is created IF NOT EXISTS, and folding a
// partition again changes nothing in the rollups that keep a maximum. The
// summing rollup would count a partition twice, so each partition folded
// into it is marked in schema.RollupFolds and not folded again. Two
// processes never fold at the same moment: only the holder of the
// migration lock (lock.go) runs a step, and it checks the lock before
// every partition.
//
// In cluster mode each rollup is a replicated <rollup>_local on every host
// with a Distributed table over it, sharded by project like the snapshots;
// each host's materialized view reads its own message_read_snapshots_local
// and writes its own rollup's local table, whose replication brings the
// rows to the shard's other replicas. The fold reads and writes through
// the Distributed tables.
func migrateRollups(ctx context.Context, m *migrator) error {
	d := m.ddl
	for _, q := range schema.RollupTablesDDL(d) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	// The materialized views take the rows written from their creation
	// on, the fold the older ones; the summing rollup would count a row
	// that both took twice, so its fold stops at the versions written
	// before its view existed: the cutoff, taken before the views are
	// created and kept for a later run of this step.
	cutoff, err := foldCutoff(ctx, m)
	if err != nil {
		return err
	}
	for _, q := range schema.RollupViewsFillDDL(d) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	if err := foldPartitions(ctx, m, cutoff); err != nil {
		return err
	}
	// The day rollup last, from the daily rollup, which now holds every
	// row.
	if err := foldDays(ctx, m); err != nil {
		return err
	}
	// A view another process replaced already is replaced again, with
	// the same definition.
	for _, q := range schema.RollupViewsDDL(d) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// foldPartitions folds each partition of the snapshot history into the
// rollups of rows, a partition at a time, and marks it folded: a later run
// of the step skips the partitions marked, for the summing rollup, which
// would count their rows twice.
func foldPartitions(ctx context.Context, m *migrator, cutoff uint64) error {
	d := m.ddl
	folded, err := chconn.QueryColumn[string](ctx, m.conn, "SELECT DISTINCT partition FROM "+d.Table(schema.RollupFolds)+" WHERE partition != ''")
	if err != nil {
		return fmt.Errorf("read %s: %w", schema.RollupFolds, err)
	}

	partitions, err := m.partitions(ctx, "message_read_snapshots")
	if err != nil {
		return err
	}
	if len(partitions) > 0 {
		m.log.Info("folding snapshot history into the rollups", "partitions", len(partitions))
	}
	rollups := schema.Rollups()
	for i, p := range partitions {
		if err := m.held(ctx); err != nil {
			return err
		}
		start := time.Now()
		for _, r := range rollups {
			where := "WHERE toYYYYMM(snapshot_at) = " + p
			if r == schema.SnapshotRollup {
				if slices.Contains(folded, p) {
					continue
				}
				where += fmt.Sprintf(" AND version < %d", cutoff)
			}
			if err := m.exec(ctx, fmt.Sprintf("INSERT INTO %s %s", d.Table(r), schema.FillSelect(r, d.Table("message_read_snapshots"), where))); err != nil {
				return fmt.Errorf("fold partition %s into %s: %w", p, r, err)
			}
		}
		if err := m.exec(ctx, fmt.Sprintf("INSERT INTO %s (partition, cutoff) SELECT %s, %d", d.Table(schema.RollupFolds), chconn.QuoteString(p), cutoff)); err != nil {
			return fmt.Errorf("mark partition %s folded: %w", p, err)
		}
		m.log.Info("folded snapshot partition", "partition", p, "done", i+1, "of", len(partitions),
			"duration_ms", time.Since(start).Milliseconds())
	}
	return nil
}

// foldCutoff returns the version below which the fold sums snapshot rows
// into the summing rollup: now, in nanoseconds like readsync's versions,
// when the rollup's materialized view does not exist yet; otherwise the
// cutoff an earlier run took before it created the view.
func foldCutoff(ctx context.Context, m *migrator) (uint64, error) {
	n, err := chconn.QueryColumn[uint64](ctx, m.conn, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", m.ddl.Database(), schema.SnapshotRollup+"_mv")
	if err != nil {
		return 0, fmt.Errorf("look for %s_mv: %w", schema.SnapshotRollup, err)
	}
	if n[0] > 0 {
		c, err := chconn.QueryColumn[uint64](ctx, m.conn, "SELECT max(cutoff) FROM "+m.ddl.Table(schema.RollupFolds)+" WHERE partition = ''")
		if err != nil {
			return 0, fmt.Errorf("read the fold's cutoff: %w", err)
		}
		return c[0], nil
	}
	cutoff := uint64(time.Now().UnixNano())
	if err := m.exec(ctx, fmt.Sprintf("INSERT INTO %s (partition, cutoff) SELECT '', %d", m.ddl.Table(schema.RollupFolds), cutoff)); err != nil {
		return 0, fmt.Errorf("record the fold's cutoff: %w", err)
	}
	return cutoff, nil
}

// foldDays computes every project day of the day rollup from the daily
// rollup, a month at a time, which bounds the GROUP BY's memory by a
// month's messages × days.
func foldDays(ctx context.Context, m *migrator) error {
	return m.foldMonths(ctx, schema.DailyRollup, schema.DayRollup, "folded project days", func(month string) string {
		return schema.DayRefresh(m.ddl.Names, "WHERE toYYYYMM(day) = "+month)
	})
}
