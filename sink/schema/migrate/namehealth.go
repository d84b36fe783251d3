package migrate

import (
	"context"

	"github.com/readsync/readsync/sink/schema"
)

// migrateNameFailureHours is migration 14: it creates the rollup and its
// materialized view, folds the failures written before into it a month
// at a time, and only then points name_health at it, so that the view
// never shows a day the rollup has not folded yet. Run again, it changes
// nothing the view shows.
func migrateNameFailureHours(ctx context.Context, m *migrator) error {
	d := m.ddl
	stmts := schema.NameFailureHoursDDL(d)
	create, replace := stmts[:len(stmts)-2], stmts[len(stmts)-2:]
	for _, q := range create {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	err := m.foldMonths(ctx, schema.NameFailuresTable.Name(), schema.NameFailureHours, "folded the names' failures into their hours", func(month string) string {
		return schema.NameFailureHoursRefill(d.Names, "WHERE toYYYYMM(snapshot_at) = "+month)
	})
	if err != nil {
		return err
	}
	for _, q := range replace {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
