package clickhouse

import "context"

// PreviousSchema exposes previousSchema, release 5013242's statements, to
// the tests of package clickhouse_test.
var PreviousSchema = previousSchema

// MigrateFirst applies the first n migrations only: the schema an earlier
// release left, for the tests of package clickhouse_test that upgrade from it.
func MigrateFirst(ctx context.Context, c *ClickHouse, n int) error {
	return c.migrate(ctx, migrations()[:n])
}
