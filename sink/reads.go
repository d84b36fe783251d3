package sink

import (
	"context"
	"sync/atomic"
)

// Reads adds up what the server read to answer the statements sent under
// one context: the rows and the uncompressed bytes its progress reports
// counted, whole granules included. A pass and a reconcile step each
// count their own, so that an operator sees what they cost the server as
// the history grows (a read that follows the sort key costs the granules
// around what changed; one that does not costs the history). It is safe
// for concurrent use: a pass writes several batches at once.
type Reads struct {
	rows, bytes atomic.Uint64
	outer       *Reads // also counts what this one does; nil for none
}

type readsKey struct{}

// CountReads returns a context under which the statements a sink sends add
// what the server read to the returned Reads, and to the Reads of ctx, if
// any, as well: a step inside a command counts for both.
func CountReads(ctx context.Context) (context.Context, *Reads) {
	r := &Reads{}
	if outer := ReadsOf(ctx); outer != nil {
		r.outer = outer
	}
	return context.WithValue(ctx, readsKey{}, r), r
}

// ReadsOf returns the Reads statements sent under ctx add to, nil when
// nothing counts them.
func ReadsOf(ctx context.Context) *Reads {
	r, _ := ctx.Value(readsKey{}).(*Reads)
	return r
}

// Add counts rows and bytes read.
func (r *Reads) Add(rows, bytes uint64) {
	for ; r != nil; r = r.outer {
		r.rows.Add(rows)
		r.bytes.Add(bytes)
	}
}

// Rows is how many rows the server read.
func (r *Reads) Rows() uint64 { return r.rows.Load() }

// Bytes is how many uncompressed bytes the server read.
func (r *Reads) Bytes() uint64 { return r.bytes.Load() }
