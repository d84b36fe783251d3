package chconn_test

import (
	"context"
	"testing"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/sinktest"
)

// The server reads each quoted name back as it was.
func TestQuoteIdentOnTheServer(t *testing.T) {
	db := sinktest.New(t)
	for _, name := range []string{"plain", "back`tick", `back\slash`, "`; DROP DATABASE x; --", "ünï ☕"} {
		rows, err := db.Conn.Query(context.Background(), "SELECT 1 AS "+chconn.QuoteIdent(name))
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
