// Package chconn is readsync's connection to ClickHouse and what it knows
// of the server there: the DSN, the names and places of the tables for a
// topology, the server's release and capabilities, the hosts of a cluster,
// the settings and external data sent with statements, and the INSERT of
// rows of a declared table (Table) with its deduplication token. It knows
// no table of readsync's: their declarations, package schema's, satisfy
// its Table.
package chconn

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
)

// Conn is a connection to the ClickHouse server of a DSN, for one database
// and topology. It is safe for concurrent use; Close releases its
// connections.
type Conn struct {
	conn     driver.Conn
	opts     clickhouse.Options // what conn was opened with, to reach the other hosts of a cluster
	names    Names              // names the database and the tables in it
	password string
	log      *slog.Logger

	serverMu sync.Mutex
	server   *Server // nil until the server first answers

	observe func(table string, rows int, d time.Duration, err error)
}

// Open connects to the server the DSN names, for the tables of topo, and
// reports to log what it finds out about the server. It does not require
// the DSN's database to exist, and every statement names its database
// explicitly.
func Open(dsn DSN, topo Topology, log *slog.Logger) (*Conn, error) {
	opts := *dsn.opts
	opts.Auth.Database = ""
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 10 * time.Second
	}
	conn, err := clickhouse.Open(&opts)
	if err != nil {
		return nil, redactSecret(fmt.Errorf("open ClickHouse: %w", err), dsn.Password())
	}
	return &Conn{conn: conn, opts: opts, names: Names{db: dsn.database, topo: topo}, password: dsn.Password(), log: log}, nil
}

// ForDatabase returns a Conn to the same server for the database and
// topology of n, sharing c's connections: for statements tried in a
// scratch database. It logs nothing and reports no INSERT; closing c
// closes it too.
func (c *Conn) ForDatabase(n Names) *Conn {
	return &Conn{conn: c.conn, opts: c.opts, names: n, password: c.password, log: slog.New(slog.DiscardHandler)}
}

// Close closes the connections.
func (c *Conn) Close() error { return c.conn.Close() }

// Names names the database and the tables in it.
func (c *Conn) Names() Names { return c.names }

// Log is where c reports what it finds out; the packages that send
// statements through c report their progress there too.
func (c *Conn) Log() *slog.Logger { return c.log }

// ObserveInserts makes every INSERT of Insert report its table, row count,
// duration and error to f, e.g. to feed metrics. Call it before the first
// write.
func (c *Conn) ObserveInserts(f func(table string, rows int, d time.Duration, err error)) {
	c.observe = f
}

// Intercept sends every statement of c, and of the Conns ForDatabase
// returns from then on, through the connection wrap returns for c's own,
// for tests that record or rewrite statements. Call it before c sends any.
func (c *Conn) Intercept(wrap func(driver.Conn) driver.Conn) { c.conn = wrap(c.conn) }

// Ping checks that the server answers now.
func (c *Conn) Ping(ctx context.Context) error { return c.conn.Ping(ctx) }

// Exec runs a statement that returns no rows.
func (c *Conn) Exec(ctx context.Context, query string, args ...any) error {
	return c.conn.Exec(countReads(ctx), query, args...)
}

// Query runs a statement and returns its rows, which the caller closes.
func (c *Conn) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	return c.conn.Query(countReads(ctx), query, args...)
}

// QueryRow runs a statement that returns one row.
func (c *Conn) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	return c.conn.QueryRow(countReads(ctx), query, args...)
}

// countReads makes the server's progress reports of a statement sent
// under ctx count in ctx's sink.Reads, if it has one: each report holds
// the rows and bytes read since the one before.
func countReads(ctx context.Context) context.Context {
	r := sink.ReadsOf(ctx)
	if r == nil {
		return ctx
	}
	return clickhouse.Context(ctx, clickhouse.WithProgress(func(p *clickhouse.Progress) { r.Add(p.Rows, p.Bytes) }))
}

// InsertRow sends an INSERT of one row, its columns' values in the order
// query names them: a record of something done, such as a migration or a
// reconcile. It carries the settings of every INSERT (insertSettings), so
// that a record confirmed is written.
func (c *Conn) InsertRow(ctx context.Context, query string, values ...any) error {
	s, err := c.Server(ctx)
	if err != nil {
		return err
	}
	bctx, release := batchContext(WithSettings(ctx, c.insertSettings(s)))
	defer release()
	b, err := c.conn.PrepareBatch(bctx, query)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Append(values...); err != nil {
		return err
	}
	err = b.Send()
	release()
	return err
}
