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
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// EnvDSN names the variable holding the test server's DSN.
const EnvDSN = "READSYNC_TEST_CLICKHOUSE_DSN"

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
	base := os.Getenv(EnvDSN)
	if base == "" {
		if os.Getenv("READSYNC_REQUIRE_CLICKHOUSE") == "1" {
			t.Fatalf("%s is not set; run the tests with `make test`, which starts ClickHouse", EnvDSN)
		}
		t.Skipf("%s is not set; `make test` starts a local ClickHouse and sets it", EnvDSN)
	}
	opts, err := clickhouse.ParseDSN(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvDSN, err)
	}
	opts.Auth.Database = ""
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatalf("open ClickHouse: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("ClickHouse at %s does not answer: %v", EnvDSN, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "readsync_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if os.Getenv("READSYNC_KEEP_TEST_DB") != "1" {
			_ = conn.Exec(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
		}
		conn.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvDSN, err)
	}
	u.Path = "/" + name
	return &DB{DSN: u.String(), Name: name, Conn: conn}
}

// Table returns the quoted, database-qualified name of a table.
func (d *DB) Table(name string) string { return "`" + d.Name + "`.`" + name + "`" }

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

// Lines runs q, whose one column is a String, and returns its rows in the
// order the server sent them: a way to compare query results as text,
// every value formatted by ClickHouse so that floats compare exactly.
func Lines(t testing.TB, conn driver.Conn, q string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), q)
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
