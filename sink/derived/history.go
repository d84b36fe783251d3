// Package derived keeps readsync's derived history, the rows the views
// read besides the stored history (the day rollup, the reads gained per
// snapshot and per day), a function of the stored history: how a daily
// value or a gain is computed (the gains' scan, sums and keys), refreshed
// after each write, reconciled after each pass with the changes the
// server recorded, folded over the whole history and mended (Repair). The
// tables and the SQL that fills them are package schema's; what judges
// them, apart from this code, is package verify.
package derived

import (
	"sync"
	"time"

	"github.com/readsync/readsync/sink/chconn"
)

// History keeps the derived rows of the database of one connection. It is
// safe for concurrent use; its connection stays its caller's to close.
type History struct {
	conn  *chconn.Conn
	names chconn.Names // names the database and the tables in it

	// settle, when positive, replaces the reconcile's settle delay (see
	// Settle); lease and refreshLease, when positive, replace the leases
	// of the same names (see Lease and RefreshLease).
	settle              time.Duration
	lease, refreshLease time.Duration

	// reconcileMu makes this process's reconcile steps run one at a time.
	reconcileMu sync.Mutex

	// gainPeriods are the periods whose gains rollups a refresh of gains
	// keeps: days and hours, days alone before migration 12.
	gainPeriods []chconn.Period
	// untipped is set for a fold before migration 15, which creates the
	// tip rollup and the record of refreshes: it writes neither.
	untipped bool
}

// Option changes how a History works.
type Option func(*History)

// WithSettle makes the reconcile read a change d after its time, instead
// of the delay that makes sure it is visible (see History.Settle): for
// tests that write and reconcile in turn, one process at a time.
func WithSettle(d time.Duration) Option { return func(h *History) { h.settle = d } }

// WithLease makes the other daemons leave the steps to the one that
// recorded the latest step for d, instead of Lease (see History.Lease):
// for tests of a daemon that takes over from one that stopped.
func WithLease(d time.Duration) Option { return func(h *History) { h.lease = d } }

// WithRefreshLease makes a recomputation that recorded no end count as
// running for d after its start, instead of refreshLease (see
// History.RefreshLease): for tests of a recomputation that died.
func WithRefreshLease(d time.Duration) Option { return func(h *History) { h.refreshLease = d } }

// New returns the History of the database of c.
func New(c *chconn.Conn, opts ...Option) *History {
	h := &History{conn: c, names: c.Names(), gainPeriods: []chconn.Period{chconn.Day, chconn.Hour}}
	for _, o := range opts {
		o(h)
	}
	return h
}
