package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ClickHouse writes rows to a ClickHouse server over the native protocol.
// It is safe for concurrent use; Close releases its connections.
type ClickHouse struct {
	conn     driver.Conn
	db       string
	password string

	schemaMu sync.Mutex
	migrated bool

	observe func(table string, rows int, d time.Duration, err error)
	log     *slog.Logger
}

// LogTo makes migrations report their progress to log, e.g. how far the
// fold of existing history has come. Call it before Migrate.
func (c *ClickHouse) LogTo(log *slog.Logger) { c.log = log }

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

// Database is the database the DSN names ("default" when it names none).
func (d DSN) Database() string { return d.database }

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

// OpenClickHouse connects to the server the DSN names. It does not require
// the DSN's database to exist: Migrate creates it, and every statement names
// its database explicitly.
func OpenClickHouse(ctx context.Context, dsn DSN) (*ClickHouse, error) {
	opts := *dsn.opts
	opts.Auth.Database = ""
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 10 * time.Second
	}
	conn, err := clickhouse.Open(&opts)
	if err != nil {
		return nil, redact(fmt.Errorf("open ClickHouse: %w", err), dsn.Password())
	}
	return &ClickHouse{conn: conn, db: dsn.database, password: dsn.Password()}, nil
}

// Close closes the connections.
func (c *ClickHouse) Close() error { return c.conn.Close() }

// Database is the database the tables live in.
func (c *ClickHouse) Database() string { return c.db }

// Ping checks that the server answers and returns its version.
func (c *ClickHouse) Ping(ctx context.Context) (string, error) {
	if err := c.conn.Ping(ctx); err != nil {
		return "", c.redact(fmt.Errorf("ping ClickHouse: %w", err))
	}
	v, err := c.conn.ServerVersion()
	if err != nil {
		return "", c.redact(fmt.Errorf("ClickHouse server version: %w", err))
	}
	return fmt.Sprintf("%d.%d.%d", v.Version.Major, v.Version.Minor, v.Version.Patch), nil
}

// Migrate creates the database, tables and views when missing, and the
// rollups the views read, folding existing history into them. It is
// idempotent and runs on ClickHouse 18.16 and current releases.
func (c *ClickHouse) Migrate(ctx context.Context) error {
	c.schemaMu.Lock()
	defer c.schemaMu.Unlock()
	for _, m := range migrations(c.db) {
		if err := c.conn.Exec(ctx, m.sql); err != nil {
			return c.redact(fmt.Errorf("migration %q: %w", m.name, err))
		}
	}
	if err := c.migrateRollups(ctx); err != nil {
		return fmt.Errorf("migration \"dashboard rollups\": %w", err)
	}
	c.migrated = true
	return nil
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

// Write inserts the batch with one INSERT per non-empty table. Rows already
// written are harmless to write again: every table deduplicates on its key,
// keeping the highest version.
func (c *ClickHouse) Write(ctx context.Context, b *Batch) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	if err := c.insert(ctx, "projects", projectColumns, len(b.Projects), func(batch driver.Batch, i int) error {
		p := &b.Projects[i]
		return batch.Append(p.ID, p.NFT, p.Name, p.Description, p.Logo, p.Type, p.WalletAddress,
			p.CreateAt.Time(), p.Raw, p.FetchedAt.Time(), p.Version)
	}); err != nil {
		return err
	}
	if err := c.insert(ctx, "messages", messageColumns, len(b.Messages), func(batch driver.Batch, i int) error {
		m := &b.Messages[i]
		return batch.Append(m.ProjectID, m.ID, m.Sender, m.RecvGroup, receivers(m.Receivers), m.Subject, m.Type,
			boolToUInt8(m.IsAllSubscribers), m.CreateAt.Time(), m.FetchedAt.Time(), m.Version)
	}); err != nil {
		return err
	}
	if err := c.insert(ctx, "message_read_snapshots", snapshotColumns, len(b.Snapshots), func(batch driver.Batch, i int) error {
		s := &b.Snapshots[i]
		return batch.Append(s.ProjectID, s.MessageID, s.SnapshotAt.Time(), s.ReadCount, s.Total, s.Percent, s.FetchedAt.Time(), s.Version)
	}); err != nil {
		return err
	}
	// Part of the write: when it fails, the batch is written again or
	// spooled, and the next try refreshes the same days.
	return c.refreshDays(ctx, b.Snapshots)
}

// RecordRun inserts one row into sync_runs.
func (c *ClickHouse) RecordRun(ctx context.Context, r Run) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	return c.insert(ctx, "sync_runs", runColumns, 1, func(batch driver.Batch, _ int) error {
		return batch.Append(r.RunID, r.Schedule, r.Trigger, r.SnapshotAt, r.StartedAt, r.FinishedAt,
			r.NFTTotal, r.NFTOK, r.NFTFailed, r.Messages, r.Status, r.Error)
	})
}

func (c *ClickHouse) insert(ctx context.Context, table, columns string, n int, row func(driver.Batch, int) error) error {
	if n == 0 {
		return nil
	}
	start := time.Now()
	err := c.send(ctx, table, columns, n, row)
	if c.observe != nil {
		c.observe(table, n, time.Since(start), err)
	}
	return err
}

// insertBlockRows is how many rows the driver encodes and sends at a time
// within one INSERT, so that its columnar copy of a batch, and the encoded
// block, stay a block in size rather than the whole batch's. The server
// squashes the blocks of one INSERT (min_insert_block_size_rows), so a
// batch still makes one part per table.
const insertBlockRows = 4096

func (c *ClickHouse) send(ctx context.Context, table, columns string, n int, row func(driver.Batch, int) error) error {
	// Naming the columns is required by 18.16 and keeps added columns from
	// shifting values on newer servers.
	q := fmt.Sprintf("INSERT INTO %s (%s)", c.table(table), columns)
	batch, err := c.conn.PrepareBatch(ctx, q)
	if err != nil {
		return c.redact(fmt.Errorf("insert into %s: prepare: %w", table, err))
	}
	defer batch.Close()
	for i := 0; i < n; i++ {
		if err := row(batch, i); err != nil {
			return c.redact(fmt.Errorf("insert into %s: row %d: %w", table, i, err))
		}
		if (i+1)%insertBlockRows == 0 && i+1 < n {
			if err := batch.Flush(); err != nil {
				return c.redact(fmt.Errorf("insert %d rows into %s: send block: %w", n, table, err))
			}
		}
	}
	if err := batch.Send(); err != nil {
		return c.redact(fmt.Errorf("insert %d rows into %s: %w", n, table, err))
	}
	return nil
}

func (c *ClickHouse) table(name string) string { return quoteIdent(c.db) + "." + quoteIdent(name) }

func (c *ClickHouse) redact(err error) error { return redact(err, c.password) }

func quoteIdent(s string) string { return "`" + s + "`" }

func boolToUInt8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// receivers never hands the driver a nil slice, which it would reject for
// an Array column on some versions.
func receivers(r []string) []string {
	if r == nil {
		return []string{}
	}
	return r
}

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
