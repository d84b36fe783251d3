package migrate

import (
	"context"

	"github.com/readsync/readsync/sink/schema"
)

// migrateCodecs is migration 13: the snapshot table's codecs, on the
// table that holds its rows on each host (after the move onto the sort
// key, in cluster mode, the copy), and the rollups' states'.
func migrateCodecs(ctx context.Context, m *migrator) error {
	table, err := m.snapshotsLocal(ctx)
	if err != nil {
		return err
	}
	for _, q := range append(schema.CodecDDL(m.ddl, table), schema.RollupCodecDDL(m.ddl)...) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
