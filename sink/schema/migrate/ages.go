package migrate

import (
	"context"

	"github.com/readsync/readsync/sink/schema"
)

// migrateAges is migration 16: it creates the age rollup and its views,
// then folds the snapshot history written before into the rollup, a
// month and a range of projects at a time, each snapshot with its
// message's create_at. Writes add their rows from the moment the table
// exists (a write's rows cannot reach it before), and a row both take
// counts once, as the rollup keeps a maximum; run again, it changes
// nothing the views show.
func migrateAges(ctx context.Context, m *migrator) error {
	for _, q := range schema.AgeDDL(m.ddl) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	return m.foldMonthsByProject(ctx, schema.SnapshotsTable.Name(), "snapshot_at", schema.AgeRollup, "folded history into the age rollup",
		func(month, projects string) string { return schema.AgeFold(m.ddl.Names, month, projects) })
}
