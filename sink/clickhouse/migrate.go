package clickhouse

import (
	"context"
	"fmt"
	"strings"

	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/schema/migrate"
	"github.com/readsync/readsync/sink/schema/resort"
)

// Migrate applies the migrations the database has not had yet, in order,
// and records each in schema_migrations. A database an earlier release
// created is adopted as it is. When the schema is current, Migrate only
// reads: it issues no DDL. Concurrent calls, from this process or others,
// end with the same schema and no error. The dashboard rollups are built
// by one of the migrations, which folds existing history into them.
//
// With WithSchemaFromElsewhere it applies nothing and succeeds only once
// the schema is current.
func (c *ClickHouse) Migrate(ctx context.Context) error {
	c.schemaMu.Lock()
	defer c.schemaMu.Unlock()
	apply := func() error { return migrate.Apply(ctx, c.conn, derived.FoldGains) }
	if c.waitSchema {
		apply = func() error { return c.schemaCurrent(ctx) }
	}
	if err := apply(); err != nil {
		c.migrateErr = err
		return err
	}
	c.migrated, c.migrateErr = true, nil
	return nil
}

// SchemaBehindError says that the database lacks migrations this readsync
// needs and leaves to another process (WithSchemaFromElsewhere).
type SchemaBehindError struct {
	// Applied is the database's last migration, Latest this readsync's.
	Applied, Latest uint32
	// Pending names the migrations to apply, in order.
	Pending []string
}

func (e *SchemaBehindError) Error() string {
	return fmt.Sprintf("the schema is at migration %d and this readsync needs %d: waiting for readsync --migrate to apply %s",
		e.Applied, e.Latest, strings.Join(e.Pending, ", "))
}

// schemaCurrent returns nil when the schema is current, a
// *SchemaBehindError when migrations are pending.
func (c *ClickHouse) schemaCurrent(ctx context.Context) error {
	v, err := migrate.ReadVersion(ctx, c.conn)
	if err != nil {
		return err
	}
	if !v.Current() {
		return &SchemaBehindError{Applied: v.Applied, Latest: v.Latest, Pending: v.Pending}
	}
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
func (c *ClickHouse) SchemaVersion(ctx context.Context) (migrate.Version, error) {
	v, err := migrate.ReadVersion(ctx, c.conn)
	return v, c.conn.Redact(err)
}

// TryMigrations finds out, without touching the database, whether this
// server takes readsync's migrations from the user of the DSN, by applying
// them to a scratch database (see migrate.Try).
func (c *ClickHouse) TryMigrations(ctx context.Context) error {
	return migrate.Try(ctx, c.conn, derived.FoldGains)
}

// CheckViews reads no rows but makes the server plan a query of each view
// that users query: a view an earlier release created, which this server
// no longer accepts, fails it.
func (c *ClickHouse) CheckViews(ctx context.Context) error { return migrate.CheckViews(ctx, c.conn) }

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

// ResortStep runs one bounded step of the move of message_read_snapshots
// onto the sort key of this release, in the background of a daemon (see
// resort.Step).
func (c *ClickHouse) ResortStep(ctx context.Context) (resort.Report, error) {
	if err := c.ensureSchema(ctx); err != nil {
		return resort.Report{}, err
	}
	return resort.Step(ctx, c.conn, c.resort)
}
