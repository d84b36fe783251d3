package migrate

import (
	"context"
	"fmt"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// snapshotsLocal is the table that holds the snapshot rows on each host,
// quoted and qualified: in cluster mode the one the Distributed table
// reads, which after the move onto the sort key is not
// message_read_snapshots_local (see chconn.Names.LocalName).
func (m *migrator) snapshotsLocal(ctx context.Context) (string, error) {
	d := m.ddl
	if !d.Clustered() {
		return d.Local(schema.SnapshotsTable.Name()), nil
	}
	engines, err := chconn.QueryColumn[string](ctx, m.conn, "SELECT engine_full FROM system.tables WHERE database = ? AND name = ?", d.Database(), schema.SnapshotsTable.Name())
	if err != nil {
		return "", fmt.Errorf("read the engine of %s: %w", schema.SnapshotsTable.Name(), err)
	}
	if len(engines) == 1 {
		if local, ok := chconn.DistributedLocal(engines[0]); ok {
			return d.Table(local), nil
		}
	}
	return d.Local(schema.SnapshotsTable.Name()), nil
}

// migrateHourly is migration 12: it creates the hourly resolution and
// folds the history written before into it, a partition at a time. The
// materialized view exists before the fold, so no row is missed; a row
// both take counts once, as the rollup keeps a maximum. The hour rollup
// is computed from the hourly rollup, and the hour gains from the gains
// rollup, with a key (0) below every key a refresh writes, so that any
// later refresh of the hour replaces it. Run again, it changes nothing
// the views show.
func migrateHourly(ctx context.Context, m *migrator) error {
	d := m.ddl
	snapshots, err := m.snapshotsLocal(ctx)
	if err != nil {
		return err
	}
	for _, q := range schema.HourlyDDL(d, snapshots) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	// The messages' hours hold a group per snapshot row at an hourly
	// cadence: they are folded a range of projects at a time.
	const msg = "folded history into the hourly resolution"
	err = m.foldMonthsByProject(ctx, schema.SnapshotsTable.Name(), "snapshot_at", schema.HourlyRollup, msg, func(month, projects string) string {
		return fmt.Sprintf("INSERT INTO %s %s", d.Table(schema.HourlyRollup),
			schema.FillSelect(schema.HourlyRollup, d.Table(schema.SnapshotsTable.Name()), "WHERE toYYYYMM(snapshot_at) = "+month+" AND "+projects))
	})
	if err != nil {
		return err
	}
	err = m.foldMonthsByProject(ctx, schema.HourlyRollup, "hour", schema.HourRollup, msg, func(month, projects string) string {
		return schema.HourRefresh(d.Names, "WHERE toYYYYMM(hour) = "+month+" AND "+projects)
	})
	if err != nil {
		return err
	}
	return m.foldMonths(ctx, schema.GainsRollup, schema.HourGainsRollup, msg, func(month string) string {
		return fmt.Sprintf(`INSERT INTO %s (project_id, hour, hour_gain_state)
SELECT project_id, hour, argMaxState((snapshots, new_messages, reads_gained, missed_ticks), '0')
FROM
(
    SELECT project_id, %s AS hour, count() AS snapshots, sum(n) AS new_messages, sum(r) AS reads_gained, sum(t) AS missed_ticks
    FROM
    (
        SELECT project_id, snapshot_at, argMax(gain_new_messages, gain_key) AS n, argMax(gain_reads, gain_key) AS r,
            argMax(gain_missed_ticks, gain_key) AS t
        FROM %s
        WHERE toYYYYMM(snapshot_at) = %s
        GROUP BY project_id, snapshot_at
    )
    GROUP BY project_id, hour
)
GROUP BY project_id, hour`, d.Table(schema.HourGainsRollup), schema.HourOf, d.Table(schema.GainsRollup), month)
	})
}
