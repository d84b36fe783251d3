package migrate

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// GainsFolder computes the reads gained at every snapshot of c's database
// from its whole history, a group of projects at a time, reporting its
// progress to log and asking held before each group whether it may go on.
// Migration 7 needs it; package derived has it (FoldGains), and the caller
// of the migrations passes it in, so that the migrations do not depend on
// how gains are computed.
type GainsFolder func(ctx context.Context, c *chconn.Conn, log *slog.Logger, held func(context.Context) error) error

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
	for _, q := range schema.GainsTablesDDL(d) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	partitions, err := m.partitions(ctx, schema.SnapshotsTable.Name())
	if err != nil {
		return err
	}
	for _, p := range partitions {
		if err := m.exec(ctx, fmt.Sprintf("INSERT INTO %s %s", d.Table(schema.FirstRollup),
			schema.FillSelect(schema.FirstRollup, d.Table(schema.SnapshotsTable.Name()), "WHERE toYYYYMM(snapshot_at) = "+p))); err != nil {
			return fmt.Errorf("fold partition %s into %s: %w", p, schema.FirstRollup, err)
		}
	}
	for _, q := range schema.GainsViewsDDL(d) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// migrateDerived is migration 7: the derived rows become a function of
// the stored history that readsync can check and mend. It
//   - adds to message_read_snapshots the schedule that wrote each row, by
//     which reads gained count missed ticks (package derived's
//     gainschedules.go), and keeps the schedules release 0.3.0 counted the
//     history's missed ticks by;
//   - adds to the gains rollup the newest write at each snapshot, which
//     project_read_snapshots shows from then on: a choice between
//     refreshes, where the summing rollup it read before counted a
//     repeated INSERT twice on servers without deduplication tokens;
//   - creates the change logs and the record of reconciles (schema's
//     changes.go; package derived's reconcile.go), before the fold, so
//     that what other processes write meanwhile is reconciled after;
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
	if err := m.addColumn(ctx, schema.SnapshotsTable.Name(), "schedule", "String", "version"); err != nil {
		return err
	}
	after := "gain_schedule"
	for _, col := range schema.GainColumnsSince7 {
		if err := m.addColumn(ctx, schema.GainsRollup, col, "UInt64", after); err != nil {
			return err
		}
		after = col
	}
	for _, q := range schema.DerivedTablesDDL(d) {
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
	if err := m.gains(ctx, m.conn, m.log, m.held); err != nil {
		return err
	}
	for _, q := range schema.SnapshotsViewDDL(d) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// fillLegacySchedules copies into legacySchedulesTable the schedule of
// every snapshot whose gains release 0.3.0 computed with one: the
// highest of its rows with a key of that release's form (which starts
// with 0; see package derived's gainKeyFormat). Run again, it copies the
// same: a key of this release's form never counts.
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
WHERE legacy_schedule != ''`, m.ddl.Table(schema.LegacySchedules), m.ddl.Table(schema.GainsRollup))
	if err := m.exec(ctx, q); err != nil {
		return fmt.Errorf("keep the schedules of the gains computed before: %w", err)
	}
	return nil
}
