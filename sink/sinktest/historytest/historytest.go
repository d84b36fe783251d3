// Package historytest is what the tests of readsync's sink packages share
// beyond a fresh database: opening the sink on one, a generated history
// written the way readsync writes it, and the brute forces that judge the
// derived rows over it. It lets the tests of the derived rows and of their
// judge live beside packages derived and verify rather than in package
// clickhouse's tests, whose helpers no other package can import. Only
// tests import it.
package historytest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/schema/migrate"
	"github.com/readsync/readsync/sink/sinktest"
)

// OpenSink opens readsync's sink on dsn, closed when the test ends.
func OpenSink(t *testing.T, dsn string, opts ...clickhouse.Option) *clickhouse.ClickHouse {
	t.Helper()
	d, err := chconn.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := clickhouse.OpenClickHouse(context.Background(), d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// OpenCluster opens readsync's sink on a node of the cluster, its tables
// placed on the cluster, with opts besides, closed when the test ends.
func OpenCluster(t *testing.T, c *sinktest.Cluster, node int, opts ...clickhouse.Option) *clickhouse.ClickHouse {
	t.Helper()
	return OpenSink(t, c.DSNs[node], append([]clickhouse.Option{clickhouse.WithTopology(chconn.Topology{Cluster: c.Name, ReplicaPath: c.ReplicaPath})}, opts...)...)
}

// OpenTestSink opens the sink on a fresh database, migrated.
func OpenTestSink(t *testing.T) (*clickhouse.ClickHouse, *sinktest.DB) {
	t.Helper()
	db := sinktest.New(t)
	ch := OpenSink(t, db.DSN)
	ctx := context.Background()
	// Twice: migrations must be idempotent.
	for i := 0; i < 2; i++ {
		if err := ch.Migrate(ctx); err != nil {
			t.Fatalf("migrate run %d: %v", i+1, err)
		}
	}
	return ch, db
}

// OpenSettled opens a second sink on db whose reconcile reads a change a
// second after its time, with opts besides, migrated: for tests that
// write and then wait for the steps.
func OpenSettled(t *testing.T, db *sinktest.DB, opts ...clickhouse.Option) *clickhouse.ClickHouse {
	t.Helper()
	ch := OpenSink(t, db.DSN, append([]clickhouse.Option{clickhouse.WithReconcileSettle(time.Second)}, opts...)...)
	if err := ch.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ch
}

// MigrateFirst applies the first n migrations only to the database of
// dsn, on a connection of its own: the schema an earlier release left,
// for the tests that upgrade from it.
func MigrateFirst(t *testing.T, dsn string, n int) {
	t.Helper()
	d, err := chconn.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := chconn.Open(d, chconn.Topology{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := migrate.ApplyFirst(context.Background(), conn, derived.FoldGains, n); err != nil {
		t.Fatal(err)
	}
}
