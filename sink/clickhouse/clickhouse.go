// Package clickhouse writes readsync's rows to ClickHouse: its tables,
// created and migrated here and written in large batches, and the rows
// derived from them.
package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
)

// ClickHouse writes rows to a ClickHouse server over the native protocol.
// It is safe for concurrent use; Close releases its connections.
type ClickHouse struct {
	conn     driver.Conn
	opts     clickhouse.Options // what conn was opened with, to reach the other hosts of a cluster
	ddl      ddl                // names the database and the tables in it
	password string
	log      *slog.Logger

	schemaMu   sync.Mutex
	migrated   bool
	migrateErr error // why the last Migrate failed; nil once one succeeds

	serverMu sync.Mutex
	server   *Server // nil until the server first answers

	// reconcileMu makes this process's reconciles run one at a time.
	reconcileMu sync.Mutex

	observe func(table string, rows int, d time.Duration, err error)
}

// ObserveInserts makes every INSERT report its table, row count, duration
// and error to f, e.g. to feed metrics. Call it before the first write.
func (c *ClickHouse) ObserveInserts(f func(table string, rows int, d time.Duration, err error)) {
	c.observe = f
}

// DSN is a parsed READSYNC_CLICKHOUSE_DSN.
type DSN struct {
	opts     *clickhouse.Options
	database string
}

// Password is the DSN's password, so that callers can keep it out of what
// they print.
func (d DSN) Password() string { return d.opts.Auth.Password }

// ParseDSN parses a native-protocol DSN such as
// clickhouse://user:pass@host:9000/database?dial_timeout=5s. Errors never
// contain the password.
func ParseDSN(dsn string) (DSN, error) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return DSN{}, errors.New("not a URL: expected clickhouse://user:password@host:9000/database")
	}
	switch strings.ToLower(scheme) {
	case "clickhouse", "tcp":
	default:
		return DSN{}, fmt.Errorf("scheme %q: readsync speaks the native protocol, use clickhouse://host:9000/database", scheme)
	}
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return DSN{}, redact(err, passwordOf(dsn))
	}
	db := opts.Auth.Database
	if db == "" {
		db = "default"
	}
	if strings.ContainsAny(db, "`\\/") {
		return DSN{}, fmt.Errorf("database name %q has a character readsync does not quote", db)
	}
	return DSN{opts: opts, database: db}, nil
}

// passwordOf extracts a password from a DSN that may not parse, so that it
// can be removed from error text.
func passwordOf(dsn string) string {
	_, rest, _ := strings.Cut(dsn, "://")
	userinfo, _, ok := strings.Cut(rest, "@")
	if !ok {
		return ""
	}
	_, pass, _ := strings.Cut(userinfo, ":")
	if p, err := url.PathUnescape(pass); err == nil {
		return p
	}
	return pass
}

// Option configures OpenClickHouse.
type Option func(*ClickHouse)

// WithTopology places the tables on a cluster (see Topology); without it
// they live on the one server the DSN names.
func WithTopology(t Topology) Option { return func(c *ClickHouse) { c.ddl.topo = t } }

// WithLogger sets where migrations report their progress; by default
// nowhere.
func WithLogger(l *slog.Logger) Option { return func(c *ClickHouse) { c.log = l } }

// OpenClickHouse connects to the server the DSN names. It does not require
// the DSN's database to exist: Migrate creates it, and every statement names
// its database explicitly.
func OpenClickHouse(ctx context.Context, dsn DSN, options ...Option) (*ClickHouse, error) {
	opts := *dsn.opts
	opts.Auth.Database = ""
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 10 * time.Second
	}
	conn, err := clickhouse.Open(&opts)
	if err != nil {
		return nil, redact(fmt.Errorf("open ClickHouse: %w", err), dsn.Password())
	}
	c := &ClickHouse{conn: conn, opts: opts, ddl: ddl{db: dsn.database}, password: dsn.Password(),
		log: slog.New(slog.DiscardHandler)}
	for _, o := range options {
		o(c)
	}
	return c, nil
}

// Close closes the connections.
func (c *ClickHouse) Close() error { return c.conn.Close() }

// Database is the database the tables live in.
func (c *ClickHouse) Database() string { return c.ddl.db }

// Ping checks that the server answers now and returns its release.
func (c *ClickHouse) Ping(ctx context.Context) (string, error) {
	if err := c.conn.Ping(ctx); err != nil {
		return "", c.redact(fmt.Errorf("ping ClickHouse: %w", err))
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
	if err := c.migrate(ctx, migrations()); err != nil {
		c.migrateErr = c.redact(err)
		return c.migrateErr
	}
	c.migrated, c.migrateErr = true, nil
	return nil
}

// MigrateErr is why the last Migrate failed, or nil: whether the server
// did not answer or refused (see Refused), for a readiness probe to say.
func (c *ClickHouse) MigrateErr() error {
	c.schemaMu.Lock()
	defer c.schemaMu.Unlock()
	return c.migrateErr
}

// SchemaVersion reads which migrations the database has had and which are
// pending. It changes nothing.
func (c *ClickHouse) SchemaVersion(ctx context.Context) (SchemaVersion, error) {
	v, _, err := c.schemaVersion(ctx, migrations())
	return v, c.redact(err)
}

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
	if err := insert(ctx, c, &projectsTable, b, b.Projects); err != nil {
		return err
	}
	if err := insert(ctx, c, &messagesTable, b, b.Messages); err != nil {
		return err
	}
	if err := insert(ctx, c, &snapshotsTable, b, b.Snapshots); err != nil {
		return err
	}
	if err := c.refresh(ctx, writtenSnapshots(b.Snapshots)); err != nil {
		c.log.Warn("derived rows not refreshed after a write; the next reconcile refreshes them", "snapshot_rows", len(b.Snapshots), "err", err)
	}
	return nil
}

// RecordRun inserts one row into sync_runs.
func (c *ClickHouse) RecordRun(ctx context.Context, r sink.Run) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	return insert(ctx, c, &runsTable, nil, []sink.Run{r})
}

// insert writes rows of the batch b (nil for rows without one) into t with
// one INSERT and reports it to observe.
func insert[R any](ctx context.Context, c *ClickHouse, t *table[R], b *sink.Batch, rows []R) error {
	if len(rows) == 0 {
		return nil
	}
	start := time.Now()
	err := send(ctx, c, t, b, rows)
	if c.observe != nil {
		c.observe(t.name, len(rows), time.Since(start), err)
	}
	return err
}

// insertBlockRows is how many rows the driver encodes and sends at a time
// within one INSERT, so that its columnar copy of a batch, and the encoded
// block, stay a block in size rather than the whole batch's. The server
// squashes the blocks of one INSERT (min_insert_block_size_rows), so a
// batch still makes one part per table.
const insertBlockRows = 4096

func send[R any](ctx context.Context, c *ClickHouse, t *table[R], b *sink.Batch, rows []R) error {
	n := len(rows)
	settings := c.insertSettings()
	if s, _ := c.Server(ctx); s.DedupTokens() {
		settings[settingDedupToken] = insertToken(t, b, rows)
	}
	ctx = withSettings(ctx, settings)
	// Naming the columns is required by 18.16 and keeps added columns from
	// shifting values on newer servers.
	q := fmt.Sprintf("INSERT INTO %s (%s)", c.ddl.table(t.name), t.columnList())
	batch, err := c.conn.PrepareBatch(ctx, q)
	if err != nil {
		return c.redact(fmt.Errorf("insert into %s: prepare: %w", t.name, err))
	}
	defer batch.Close()
	appendRow := t.appender(b)
	for i := range rows {
		if err := appendRow(batch, &rows[i]); err != nil {
			return c.redact(fmt.Errorf("insert into %s: row %d: %w", t.name, i, err))
		}
		if (i+1)%insertBlockRows == 0 && i+1 < n {
			if err := batch.Flush(); err != nil {
				return c.redact(fmt.Errorf("insert %d rows into %s: send block: %w", n, t.name, err))
			}
		}
	}
	if err := batch.Send(); err != nil {
		return c.redact(fmt.Errorf("insert %d rows into %s: %w", n, t.name, err))
	}
	return nil
}

// syncInserts makes INSERTs through a Distributed table return only once
// every shard has its rows, so that a batch taken out of the spool is on
// the cluster, not in a queue on the host that received it.
func (c *ClickHouse) syncInserts(ctx context.Context) context.Context {
	if !c.ddl.clustered() {
		return ctx
	}
	return withSettings(ctx, c.insertSettings())
}

// insertSettings are the settings of every INSERT: in cluster mode,
// insert_distributed_sync (see syncInserts).
func (c *ClickHouse) insertSettings() clickhouse.Settings {
	s := clickhouse.Settings{}
	if c.ddl.clustered() {
		s["insert_distributed_sync"] = 1
	}
	return s
}

// settingsKey carries the settings readsync gave a context's queries, so
// that giving one more keeps the others: clickhouse-go's WithSettings
// replaces them all.
type settingsKey struct{}

// withSettings returns ctx whose queries carry s, besides the settings
// ctx gives them already.
func withSettings(ctx context.Context, s clickhouse.Settings) context.Context {
	merged := clickhouse.Settings{}
	if prev, ok := ctx.Value(settingsKey{}).(clickhouse.Settings); ok {
		maps.Copy(merged, prev)
	}
	maps.Copy(merged, s)
	return clickhouse.Context(context.WithValue(ctx, settingsKey{}, merged), clickhouse.WithSettings(merged))
}

func (c *ClickHouse) redact(err error) error { return redact(err, c.password) }

// redact removes a secret from an error's text while keeping the chain for
// errors.Is and errors.As.
func redact(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), secret, "xxxxx"), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
