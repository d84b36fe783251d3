package clickhouse_test

import (
	"context"
	"testing"

	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// When the schema is current, starting only reads: on a connection the
// server refuses every write and DDL on (readonly=2), Migrate succeeds and
// the ClickHouse counts as migrated. (Package migrate's
// TestMigrateIssuesNoDDLWhenCurrent shows that the same connection fails
// as soon as a step is pending.)
func TestMigratedWhenTheSchemaIsCurrent(t *testing.T) {
	db := sinktest.New(t)
	ctx := context.Background()
	open := func(dsn string) *clickhouse.ClickHouse { return historytest.OpenSink(t, dsn) }
	if err := open(db.DSN).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ro := open(db.DSN + "?readonly=2")
	if err := ro.Migrate(ctx); err != nil {
		t.Fatalf("a current schema needed more than reads: %v", err)
	}
	if !ro.Migrated() {
		t.Error("Migrated() is false after a Migrate that found nothing to do")
	}
}
