package clickhouse

import (
	"context"

	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/schema"
)

// MigrateFirst applies the first n migrations only: the schema an earlier
// release left, for the tests of package clickhouse_test that upgrade from it.
func MigrateFirst(ctx context.Context, c *ClickHouse, n int) error {
	return schema.MigrateFirst(ctx, c.conn, derived.FoldGains, n)
}
