// Package clickhouse writes readsync's rows to ClickHouse: its tables,
// created and migrated here and written in large batches, and the rows
// derived from them.
package clickhouse

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/schema"
)

// ClickHouse writes rows to a ClickHouse server over the native protocol.
// It is safe for concurrent use; Close releases its connections.
type ClickHouse struct {
	conn    *chconn.Conn
	history *derived.History

	schemaMu   sync.Mutex
	migrated   bool
	migrateErr error // why the last Migrate failed; nil once one succeeds
}

// ObserveInserts makes every INSERT report its table, row count, duration
// and error to f, e.g. to feed metrics. Call it before the first write.
func (c *ClickHouse) ObserveInserts(f func(table string, rows int, d time.Duration, err error)) {
	c.conn.ObserveInserts(f)
}

// Option configures OpenClickHouse.
type Option func(*options)

// options are what OpenClickHouse opens the connection with.
type options struct {
	topo chconn.Topology
	log  *slog.Logger
}

// WithTopology places the tables on a cluster (see chconn.Topology);
// without it they live on the one server the DSN names.
func WithTopology(t chconn.Topology) Option { return func(o *options) { o.topo = t } }

// WithLogger sets where migrations report their progress; by default
// nowhere.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// OpenClickHouse connects to the server the DSN names. It does not require
// the DSN's database to exist: Migrate creates it, and every statement names
// its database explicitly.
func OpenClickHouse(ctx context.Context, dsn chconn.DSN, opts ...Option) (*ClickHouse, error) {
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	conn, err := chconn.Open(dsn, o.topo, o.log)
	if err != nil {
		return nil, err
	}
	return &ClickHouse{conn: conn, history: derived.New(conn)}, nil
}

// Close closes the connections.
func (c *ClickHouse) Close() error { return c.conn.Close() }

// Database is the database the tables live in.
func (c *ClickHouse) Database() string { return c.conn.Names().Database() }

// Server returns the server readsync writes to, read on the first call
// that reaches it and kept for the connection's life.
func (c *ClickHouse) Server(ctx context.Context) (chconn.Server, error) { return c.conn.Server(ctx) }

// Hosts reaches every host of the cluster, with the DSN's credentials and
// settings, and reports each one's version or why it did not answer. The
// error is for the list itself: an unknown cluster, or the server not
// answering.
func (c *ClickHouse) Hosts(ctx context.Context) ([]chconn.Host, error) { return c.conn.Hosts(ctx) }

// Clustered reports whether the tables live on a cluster, and its name.
func (c *ClickHouse) Clustered() (string, bool) {
	return c.conn.Names().Topology().Cluster, c.conn.Names().Clustered()
}

// Ping checks that the server answers now and returns its release.
func (c *ClickHouse) Ping(ctx context.Context) (string, error) {
	if err := c.conn.Ping(ctx); err != nil {
		return "", c.conn.Redact(fmt.Errorf("ping ClickHouse: %w", err))
	}
	s, err := c.Server(ctx)
	if err != nil {
		return "", err
	}
	return s.Release, nil
}

// Migrate applies the migrations the database has not had yet, in order,
// and records each in schema_migrations. A database an earlier release
// created is adopted as it is. When the schema is current, Migrate only
// reads: it issues no DDL. Concurrent calls, from this process or others,
// end with the same schema and no error. The dashboard rollups are built
// by one of the migrations, which folds existing history into them.
func (c *ClickHouse) Migrate(ctx context.Context) error {
	c.schemaMu.Lock()
	defer c.schemaMu.Unlock()
	if err := schema.Migrate(ctx, c.conn, derived.FoldGains); err != nil {
		c.migrateErr = err
		return err
	}
	c.migrated, c.migrateErr = true, nil
	return nil
}

// MigrateErr is why the last Migrate failed, or nil: whether the server
// did not answer or refused (see sink.Refused), for a readiness probe to say.
func (c *ClickHouse) MigrateErr() error {
	c.schemaMu.Lock()
	defer c.schemaMu.Unlock()
	return c.migrateErr
}

// SchemaVersion reads which migrations the database has had and which are
// pending. It changes nothing.
func (c *ClickHouse) SchemaVersion(ctx context.Context) (schema.SchemaVersion, error) {
	return schema.ReadVersion(ctx, c.conn)
}

// TryMigrations finds out, without touching the database, whether this
// server takes readsync's migrations from the user of the DSN, by applying
// them to a scratch database (see schema.TryMigrations).
func (c *ClickHouse) TryMigrations(ctx context.Context) error {
	return schema.TryMigrations(ctx, c.conn, derived.FoldGains)
}

// CheckViews reads no rows but makes the server plan a query of each view
// that users query: a view an earlier release created, which this server
// no longer accepts, fails it.
func (c *ClickHouse) CheckViews(ctx context.Context) error { return schema.CheckViews(ctx, c.conn) }

// Migrated reports whether Migrate has succeeded on this connection.
func (c *ClickHouse) Migrated() bool {
	c.schemaMu.Lock()
	defer c.schemaMu.Unlock()
	return c.migrated
}

// ensureSchema migrates on first use when the server was unreachable at
// start, so a process that began during an outage still finds its tables.
func (c *ClickHouse) ensureSchema(ctx context.Context) error {
	if c.Migrated() {
		return nil
	}
	return c.Migrate(ctx)
}

// Write inserts the batch with one INSERT per non-empty table, then
// refreshes the derived rows of the project snapshots and days it wrote.
// Rows already written are harmless to write again: every table
// deduplicates on its key, keeping the highest version.
//
// Write fails only when the rows did not reach the server. A refresh that
// fails is logged and left to the next reconcile (see Reconcile), which
// finds the snapshots in the changes the server recorded: failing the
// write instead would send the same rows again.
func (c *ClickHouse) Write(ctx context.Context, b *sink.Batch) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	if err := chconn.Insert(ctx, c.conn, schema.ProjectsTable, b, b.Projects); err != nil {
		return err
	}
	if err := chconn.Insert(ctx, c.conn, schema.MessagesTable, b, b.Messages); err != nil {
		return err
	}
	if err := chconn.Insert(ctx, c.conn, schema.SnapshotsTable, b, b.Snapshots); err != nil {
		return err
	}
	if err := c.history.Refresh(ctx, b.Snapshots); err != nil {
		c.conn.Log().Warn("derived rows not refreshed after a write; the next reconcile refreshes them", "snapshot_rows", len(b.Snapshots), "err", err)
	}
	return nil
}

// RecordRun inserts one row into sync_runs.
func (c *ClickHouse) RecordRun(ctx context.Context, r sink.Run) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	return chconn.Insert(ctx, c.conn, schema.RunsTable, nil, []sink.Run{r})
}
