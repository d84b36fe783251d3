package chconn_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/sinktest"
)

// A write whose context ends as soon as it returns (a deferred cancel)
// leaves its connection to the next statement: on one connection, every
// statement after such a write succeeds. The driver closed the connection
// at random before, failing the statement that had taken it from the pool.
func TestCancelAfterAWriteLeavesTheConnection(t *testing.T) {
	if sinktest.Lacks(sinktest.SurvivesKilledClient) {
		// A regression would close a connection mid-statement, which
		// this server does not survive: every other test would fail.
		t.Skip("the server aborts when a connection resets mid-statement; 18.16 runs this test")
	}
	db := sinktest.New(t)
	if err := db.Conn.Exec(context.Background(), "CREATE DATABASE IF NOT EXISTS "+chconn.QuoteIdent(db.Name)); err != nil {
		t.Fatal(err)
	}
	if err := db.Conn.Exec(context.Background(), "CREATE TABLE "+db.Table("notes")+" (n UInt32) ENGINE = MergeTree ORDER BY n"); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(db.DSN, "?") {
		sep = "&"
	}
	dsn, err := chconn.ParseDSN(db.DSN + sep + "max_open_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := chconn.Open(dsn, chconn.Topology{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for i := range 500 {
		ctx, cancel := context.WithCancel(context.Background())
		err := c.InsertRow(ctx, "INSERT INTO "+db.Table("notes")+" (n)", uint32(i))
		cancel()
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		var one uint8
		if err := c.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("the statement after write %d: %v", i, err)
		}
	}
}
