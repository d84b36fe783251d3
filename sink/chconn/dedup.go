package chconn

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"iter"
	"math"
	"time"

	"github.com/readsync/readsync/sink"
)

// insertToken is the deduplication token of an INSERT of rows into t: a
// digest of the table's name and of every value the INSERT carries, in
// column order. An INSERT repeated with the same rows, a spool entry
// replayed after its first attempt reached the server among them, carries
// the same token, and a server that honours tokens adds it once. Rows that
// differ in any value (every write of readsync has a version of its own)
// give another token. The digest is part of the contract with databases
// written by earlier releases: it must not change for the same rows.
//
// A table's batch columns hold one value for all the rows of an INSERT,
// written once after the table's name; a table without them (all but the
// snapshots) keeps the digest earlier releases computed.
func insertToken[R any](t Table[R], b *sink.Batch, rows iter.Seq[*R]) string {
	w := tokenWriter{h: sha256.New()}
	w.string(t.Name())
	for _, v := range t.BatchValues(nil, b) {
		w.value(v)
	}
	var vals []any
	for r := range rows {
		vals = t.RowValues(vals[:0], r)
		for _, v := range vals {
			w.value(v)
		}
	}
	return "readsync-v1-" + hex.EncodeToString(w.h.Sum(nil))
}

// tokenWriter writes values into a digest unambiguously: fixed-width
// numbers, strings with their length first. One buffer serves every
// number, so that a batch's token costs no allocation per value.
type tokenWriter struct {
	h   hash.Hash
	buf [8]byte
}

func (w *tokenWriter) uint64(x uint64) {
	binary.BigEndian.PutUint64(w.buf[:], x)
	w.h.Write(w.buf[:])
}

func (w *tokenWriter) string(s string) {
	w.uint64(uint64(len(s)))
	io.WriteString(w.h, s)
}

// value writes v. It reports false for a type it has no encoding of its
// own for, written by its printed form.
func (w *tokenWriter) value(v any) bool {
	switch x := v.(type) {
	case int64:
		w.uint64(uint64(x))
	case uint64:
		w.uint64(x)
	case uint8:
		w.uint64(uint64(x))
	case uint16:
		w.uint64(uint64(x))
	case uint32:
		w.uint64(uint64(x))
	case *uint64:
		// Nullable: a flag, then the value.
		w.uint64(boolToUint64(x != nil))
		if x != nil {
			w.uint64(*x)
		}
	case *uint32:
		w.uint64(boolToUint64(x != nil))
		if x != nil {
			w.uint64(uint64(*x))
		}
	case *float64:
		w.uint64(boolToUint64(x != nil))
		if x != nil {
			w.uint64(math.Float64bits(*x))
		}
	case float64:
		w.uint64(math.Float64bits(x))
	case time.Time:
		// DateTime columns hold whole seconds.
		w.uint64(uint64(x.Unix()))
	case string:
		w.string(x)
	case []uint64:
		w.uint64(uint64(len(x)))
		for _, u := range x {
			w.uint64(u)
		}
	case []string:
		w.uint64(uint64(len(x)))
		for _, s := range x {
			w.string(s)
		}
	default:
		// Unambiguous enough for a type added later; a test holds every
		// column of today's tables to the cases above.
		w.string(fmt.Sprintf("%T=%v", v, v))
		return false
	}
	return true
}

func boolToUint64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
