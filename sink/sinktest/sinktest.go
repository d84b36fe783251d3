// Package sinktest gives tests a fresh database on a real ClickHouse.
//
// The server comes from READSYNC_TEST_CLICKHOUSE_DSN, which `make test` sets
// after starting a local server. Without it the tests that need ClickHouse
// skip, unless READSYNC_REQUIRE_CLICKHOUSE=1 (as under `make test` and CI),
// where a missing server fails them instead of passing silently.
package sinktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// EnvDSN names the variable holding the test server's DSN.
const EnvDSN = "READSYNC_TEST_CLICKHOUSE_DSN"

// EnvLacks names the variable that lists, comma-separated, the
// Capabilities the test server lacks. The script that starts a server
// knows its build; `make test` passes what it says on.
const EnvLacks = "READSYNC_TEST_CLICKHOUSE_LACKS"

// EnvReader names the variable holding the name of a user of the test
// server, without a password, whose profile is read-only: no DDL, no
// INSERT. The scripts that start a server create readsync_reader.
const EnvReader = "READSYNC_TEST_CLICKHOUSE_READER"

// ReaderDSN returns the DSN of the database d for the user of EnvReader,
// skipping the test when the variable is unset, or failing it under
// READSYNC_REQUIRE_CLICKHOUSE_READER=1 (as `make test` sets for the
// servers its scripts start). The user is never guessed: a login the
// server refuses would take the current release's test build down.
func (d *DB) ReaderDSN(t testing.TB) string {
	t.Helper()
	user := baseFromEnv(t, EnvReader, "READSYNC_REQUIRE_CLICKHOUSE_READER", "ClickHouse with a read-only user")
	u, err := url.Parse(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}

// Capability is something a test needs of the test server beyond what
// readsync needs of every server it supports.
type Capability string

// SurvivesFailedLogin: the server answers a wrong password with an error
// and goes on serving. The chDB build of ClickHouse 26.7 that `make test`
// runs as its current release aborts the whole process instead, so a test
// that logs in with a wrong password would take it down for every other
// test.
const SurvivesFailedLogin Capability = "survives-failed-login"

// SurvivesKilledClient: the server goes on serving when a client dies
// (SIGKILL, a lost node) with the server's answer unread, which resets the
// connection. The same build aborts the whole process instead, so a test
// that kills readsync at random instants reaches such a server through a
// Proxy, which never passes a reset on.
const SurvivesKilledClient Capability = "survives-killed-client"

// DedupTokens: the server drops a repeated INSERT into a table that is
// not replicated by the token the INSERT carries (the query setting
// insert_deduplication_token with the table setting
// non_replicated_deduplication_window), and decides per materialized view
// whether a retried block is new there. 18.16 has neither setting: on one
// server a retried INSERT is added again, to the table and every view.
const DedupTokens Capability = "dedup-tokens"

// Require skips t when the test server lacks c, as EnvLacks says. It is
// the one place a test is skipped for what a server cannot do.
func Require(t testing.TB, c Capability) {
	t.Helper()
	if Lacks(c) {
		t.Skipf("the test server lacks %s (%s)", c, EnvLacks)
	}
}

// Lacks reports whether the test server lacks c, as EnvLacks says, for a
// test that works around what the server cannot do rather than skip.
func Lacks(c Capability) bool {
	for _, lack := range strings.Split(os.Getenv(EnvLacks), ",") {
		if Capability(strings.TrimSpace(lack)) == c {
			return true
		}
	}
	return false
}

// DB is a database created for one test and dropped when it ends.
type DB struct {
	// DSN names the test's own database; pass it to readsync.
	DSN string
	// Name is the database name.
	Name string
	// Conn is a connection for reading rows back; it is closed for you.
	Conn driver.Conn
}

// New creates an empty, uniquely named database (not its tables: migrating
// is the code under test's job) and registers its removal with t.Cleanup.
func New(t testing.TB) *DB {
	t.Helper()
	base := baseFromEnv(t, EnvDSN, "READSYNC_REQUIRE_CLICKHOUSE", "ClickHouse")
	name := uniqueDatabase()
	conn, dsn := connect(t, EnvDSN, base, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if os.Getenv("READSYNC_KEEP_TEST_DB") != "1" {
			_ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+quote(name))
		}
	})
	return &DB{DSN: dsn, Name: name, Conn: conn}
}

// baseFromEnv returns the DSN in the variable env. When it is unset it
// skips the test, or fails it when the variable require is 1: then a
// missing server must not pass silently. server says what `make test`
// starts, e.g. "ClickHouse".
func baseFromEnv(t testing.TB, env, require, server string) string {
	t.Helper()
	base := os.Getenv(env)
	if base == "" {
		if os.Getenv(require) == "1" {
			t.Fatalf("%s is not set; run the tests with `make test`, which starts a local %s", env, server)
		}
		t.Skipf("%s is not set; `make test` starts a local %s and sets it", env, server)
	}
	return base
}

// uniqueDatabase returns a database name no other test uses.
func uniqueDatabase() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "readsync_test_" + hex.EncodeToString(b[:])
}

// connect opens a connection to the server of the DSN base, without a
// database (the test's does not exist yet), checks that the server answers,
// and returns the connection, closed when the test ends, and base naming
// the database db instead. what names base in errors.
func connect(t testing.TB, what, base, db string) (driver.Conn, string) {
	t.Helper()
	opts, err := clickhouse.ParseDSN(base)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	u.Path = "/" + db
	opts.Auth.Database = ""
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatalf("open ClickHouse at %s: %v", what, err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("ClickHouse at %s (%s) does not answer: %v", what, opts.Addr, err)
	}
	return conn, u.String()
}

// OpenCurrent connects with the test's database as the current one, as
// a Grafana data source or a BI tool names its database: SQL written for
// them names tables without one. The connection is closed for you.
func (d *DB) OpenCurrent(t testing.TB) driver.Conn {
	t.Helper()
	opts, err := clickhouse.ParseDSN(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Table returns the quoted, database-qualified name of a table.
func (d *DB) Table(name string) string { return quote(d.Name) + "." + quote(name) }

// Count returns SELECT count() FROM the table with FINAL applied.
func (d *DB) Count(t testing.TB, table string) uint64 {
	t.Helper()
	var n uint64
	row := d.Conn.QueryRow(context.Background(), "SELECT count() FROM "+d.Table(table)+" FINAL")
	if err := row.Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// DeleteRows deletes the rows of table that match where, as a lost write
// or an operator's mistake would, and waits until the deletion is done.
func (d *DB) DeleteRows(t testing.TB, table, where string) {
	t.Helper()
	ctx := context.Background()
	q := "ALTER TABLE " + d.Table(table) + " DELETE WHERE " + where
	if err := d.Conn.Exec(ctx, q); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	for range 600 {
		var n uint64
		if err := d.Conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND is_done = 0", d.Name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the deletion from %s did not finish within a minute", table)
}

// Lines runs q, whose one column is a String, and returns its rows in the
// order the server sent them: a way to compare query results as text,
// every value formatted by ClickHouse so that floats compare exactly.
func Lines(t testing.TB, conn driver.Conn, q string) []string {
	t.Helper()
	return LinesContext(context.Background(), t, conn, q)
}

// LinesContext is Lines with the settings and deadline of ctx.
func LinesContext(ctx context.Context, t testing.TB, conn driver.Conn, q string) []string {
	t.Helper()
	rows, err := conn.Query(ctx, q)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// PreviousRelease returns ctx with the settings under which the server
// takes the views of releases before the JOIN form of sink/schema/views.go,
// as a database set up by such a release on 18.16 has them after its
// server was upgraded: joined_subquery_requires_alias = 0 where the server
// has that setting (current releases refuse those views without it; 18.16
// has no such setting and needs none). Tests set up and read the previous
// release's schema with it, never readsync's own.
func PreviousRelease(ctx context.Context, t testing.TB, conn driver.Conn) context.Context {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.settings WHERE name = 'joined_subquery_requires_alias'").Scan(&n); err != nil {
		t.Fatalf("read system.settings: %v", err)
	}
	if n == 0 {
		return ctx
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"joined_subquery_requires_alias": 0}))
}
