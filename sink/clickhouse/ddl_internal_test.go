package clickhouse

import (
	"context"
	"testing"

	"github.com/readsync/readsync/sink/sinktest"
)

// Names from configuration are quoted so that no character ends the
// quotes: a backtick or a backslash in a cluster's name stays part of the
// name.
func TestQuoteIdent(t *testing.T) {
	d := ddl{db: "d", topo: Topology{Cluster: "c`; DROP TABLE x; --\\"}}
	want := "CREATE DATABASE IF NOT EXISTS `d` ON CLUSTER `c\\`; DROP TABLE x; --\\\\`"
	if got := d.createDatabase(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// The server reads each quoted name back as it was.
func TestQuoteIdentOnTheServer(t *testing.T) {
	db := sinktest.New(t)
	for _, name := range []string{"plain", "back`tick", `back\slash`, "`; DROP DATABASE x; --", "ünï ☕"} {
		rows, err := db.Conn.Query(context.Background(), "SELECT 1 AS "+quoteIdent(name))
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		cols := rows.Columns()
		rows.Close()
		if len(cols) != 1 || cols[0] != name {
			t.Errorf("%q came back as %q", name, cols)
		}
	}
}
