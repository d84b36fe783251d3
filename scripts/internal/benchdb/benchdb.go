// Package benchdb is what the bench drivers share of their own connection
// to ClickHouse (readsync, which they measure, opens its own): parsing the
// -dsn flag without ever quoting it, since it may hold a password, opening
// the server for a database or none, and the DSN readsync is given.
package benchdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink/chconn"
	chsink "github.com/readsync/readsync/sink/clickhouse"
)

// Open connects to the server of the native DSN for database, or for none
// when database is empty (every query then names its database, which need
// not exist yet), and pings it.
func Open(ctx context.Context, dsn, database string) (driver.Conn, error) {
	// Parsing as a URL first keeps the DSN out of the error: url.Parse
	// quotes its input, so only the cause is kept.
	if _, err := parse(dsn); err != nil {
		return nil, err
	}
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("-dsn: %w", err)
	}
	opts.Auth.Database = database
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open ClickHouse: %w", err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ping ClickHouse: %w", err)
	}
	return conn, nil
}

// Version is the server's version(), such as 26.7.2.1.
func Version(ctx context.Context, conn driver.Conn) (string, error) {
	var v string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return "", fmt.Errorf("ClickHouse version: %w", err)
	}
	return v, nil
}

// DatabaseDSN is dsn with its database replaced by db, its settings kept:
// the DSN readsync is given.
func DatabaseDSN(dsn, db string) (string, error) {
	u, err := parse(dsn)
	if err != nil {
		return "", err
	}
	u.Path = "/" + db
	u.RawPath = ""
	return u.String(), nil
}

// parse parses a native DSN without ever quoting it in an error.
func parse(dsn string) (*url.URL, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("-dsn is not a URL: %w", err)
	}
	if u.Scheme != "clickhouse" && u.Scheme != "tcp" {
		return nil, fmt.Errorf("-dsn scheme %q: want clickhouse://user:password@host:9000/database", u.Scheme)
	}
	return u, nil
}

// Migrated drops the scratch database of the server of dsn, then opens
// readsync's sink on it, migrated as readsync migrates a new database, with
// its warnings to log. The caller closes it.
func Migrated(ctx context.Context, conn driver.Conn, dsn, database string, log io.Writer) (*chsink.ClickHouse, error) {
	if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS `"+database+"`"); err != nil {
		return nil, err
	}
	return OpenMigrated(ctx, dsn, database, slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// OpenMigrated opens readsync's sink on database of the server of dsn, as
// it is, and applies the migrations it lacks (none on a current one), as
// an upgrade would, logging to log. The caller closes it.
func OpenMigrated(ctx context.Context, dsn, database string, log *slog.Logger) (*chsink.ClickHouse, error) {
	raw, err := DatabaseDSN(dsn, database)
	if err != nil {
		return nil, err
	}
	d, err := chconn.ParseDSN(raw)
	if err != nil {
		return nil, err
	}
	ch, err := chsink.OpenClickHouse(ctx, d, chsink.WithLogger(log))
	if err != nil {
		return nil, err
	}
	if err := ch.Migrate(ctx); err != nil {
		ch.Close()
		return nil, err
	}
	return ch, nil
}

// Scratch is a bench's own connection to the server, the server's
// release, and readsync's sink on a scratch database migrated as readsync
// migrates a new one.
type Scratch struct {
	Conn    driver.Conn
	Version string
	Sink    *chsink.ClickHouse
}

// OpenScratch opens the server of dsn, drops database and migrates it
// again (Migrated), with the sink's warnings to log. The caller closes it.
func OpenScratch(ctx context.Context, dsn, database string, log io.Writer) (*Scratch, error) {
	conn, err := Open(ctx, dsn, "")
	if err != nil {
		return nil, err
	}
	version, err := Version(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	ch, err := Migrated(ctx, conn, dsn, database, log)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &Scratch{Conn: conn, Version: version, Sink: ch}, nil
}

// Close closes the sink and the connection.
func (s *Scratch) Close() {
	s.Sink.Close()
	s.Conn.Close()
}

// WaitForMerges waits until the server merges nothing in database, so
// that timings measure the queries, not merges competing with them for
// the cores. It calls waiting once, with the merges under way, if it has
// to wait.
func WaitForMerges(ctx context.Context, conn driver.Conn, database string, waiting func(merges uint64)) error {
	for i := 0; ; i++ {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.merges WHERE database = ?", database).Scan(&n); err != nil {
			return fmt.Errorf("read the merges under way: %w", err)
		}
		if n == 0 {
			return nil
		}
		if i == 0 && waiting != nil {
			waiting(n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// MergedSize merges table of database into one part a partition
// (OPTIMIZE … FINAL) and returns its rows and compressed bytes.
func MergedSize(ctx context.Context, conn driver.Conn, database, table string) (rows, compressed uint64, err error) {
	if err := conn.Exec(ctx, "OPTIMIZE TABLE `"+database+"`.`"+table+"` FINAL"); err != nil {
		return 0, 0, fmt.Errorf("merge %s: %w", table, err)
	}
	q := "SELECT sum(rows), sum(data_compressed_bytes) FROM system.parts WHERE active AND database = ? AND table = ?"
	if err := conn.QueryRow(ctx, q, database, table).Scan(&rows, &compressed); err != nil {
		return 0, 0, fmt.Errorf("size of %s: %w", table, err)
	}
	return rows, compressed, nil
}

// ReadMeter measures the rows a server read while another process ran
// statements on database: the growth of SelectedRows in system.events
// where the server counts it (current releases), else the read_rows of
// the statements its query log holds for the database (18.16, where the
// process's DSN must then carry log_queries=1, as LoggedDSN adds).
type ReadMeter struct {
	conn     driver.Conn
	database string
	start    time.Time
	before   uint64
}

// StartReads starts a ReadMeter.
func StartReads(ctx context.Context, conn driver.Conn, database string) (*ReadMeter, error) {
	m := &ReadMeter{conn: conn, database: database, start: time.Now()}
	var err error
	m.before, err = m.selected(ctx)
	return m, err
}

func (m *ReadMeter) selected(ctx context.Context) (uint64, error) {
	var n uint64
	if err := m.conn.QueryRow(ctx, "SELECT sum(value) FROM system.events WHERE event = 'SelectedRows'").Scan(&n); err != nil {
		return 0, fmt.Errorf("read SelectedRows from system.events: %w", err)
	}
	return n, nil
}

// Rows returns the rows read since the meter started.
func (m *ReadMeter) Rows(ctx context.Context) (uint64, error) {
	after, err := m.selected(ctx)
	if err != nil || after > 0 {
		return after - m.before, err
	}
	if err := m.conn.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		return 0, err
	}
	var n uint64
	q := "SELECT sum(read_rows) FROM system.query_log WHERE type = 2 AND event_time >= ? AND position(query, ?) > 0"
	if err := m.conn.QueryRow(ctx, q, m.start.Add(-time.Second), m.database).Scan(&n); err != nil {
		return 0, fmt.Errorf("read the query log: %w", err)
	}
	return n, nil
}

// LoggedDSN is dsn with its statements logged in the server's query log.
func LoggedDSN(dsn string) (string, error) {
	u, err := parse(dsn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("log_queries", "1")
	u.RawQuery = q.Encode()
	return u.String(), nil
}
