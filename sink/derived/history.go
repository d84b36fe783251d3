// Package derived keeps readsync's derived history, the rows the views
// read besides the stored history (the day rollup, the reads gained per
// snapshot and per day), a function of the stored history: how a daily
// value or a gain is computed (the gains' scan, sums and keys), refreshed
// after each write, reconciled after each pass with the changes the
// server recorded, folded over the whole history, checked against a brute
// force (Verify) and mended (Repair). The tables and the SQL that fills
// them are package schema's.
package derived

import (
	"sync"

	"github.com/readsync/readsync/sink/chconn"
)

// History keeps the derived rows of the database of one connection. It is
// safe for concurrent use; its connection stays its caller's to close.
type History struct {
	conn  *chconn.Conn
	names chconn.Names // names the database and the tables in it

	// reconcileMu makes this process's reconciles run one at a time.
	reconcileMu sync.Mutex
}

// New returns the History of the database of c.
func New(c *chconn.Conn) *History { return &History{conn: c, names: c.Names()} }
