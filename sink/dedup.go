package sink

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"time"
)

// dedupWindow is how many of a table's latest INSERTs a server that
// supports deduplication tokens remembers (the MergeTree setting
// non_replicated_deduplication_window, set by migration 4). An INSERT
// repeated within that many INSERTs into the same table adds nothing. At
// one INSERT per table per batch, 1000 covers weeks of hourly passes: far
// longer than a spool waits for a server that took an INSERT but whose
// answer was lost.
const dedupWindow = 1000

// insertToken is the deduplication token of an INSERT of rows into t: a
// digest of the table's name and of every value the INSERT carries, in
// column order. An INSERT repeated with the same rows, a spool entry
// replayed after its first attempt reached the server among them, carries
// the same token, and a server that honours tokens adds it once. Rows that
// differ in any value (every write of readsync has a version of its own)
// give another token. The digest is part of the contract with databases
// written by earlier releases: it must not change for the same rows.
func insertToken[R any](t *table[R], rows []R) string {
	h := sha256.New()
	writeString(h, t.name)
	for i := range rows {
		for _, c := range t.columns {
			writeValue(h, c.value(&rows[i]))
		}
	}
	return "readsync-v1-" + hex.EncodeToString(h.Sum(nil))
}

// writeValue writes v into h unambiguously: fixed-width numbers, strings
// with their length first. It reports false for a type it has no encoding
// of its own for, written by its printed form.
func writeValue(h hash.Hash, v any) bool {
	var b [8]byte
	switch x := v.(type) {
	case int64:
		binary.BigEndian.PutUint64(b[:], uint64(x))
	case uint64:
		binary.BigEndian.PutUint64(b[:], x)
	case uint8:
		binary.BigEndian.PutUint64(b[:], uint64(x))
	case float64:
		binary.BigEndian.PutUint64(b[:], math.Float64bits(x))
	case time.Time:
		// DateTime columns hold whole seconds.
		binary.BigEndian.PutUint64(b[:], uint64(x.Unix()))
	case string:
		writeString(h, x)
		return true
	case []string:
		binary.BigEndian.PutUint64(b[:], uint64(len(x)))
		h.Write(b[:])
		for _, s := range x {
			writeString(h, s)
		}
		return true
	default:
		// Unambiguous enough for a type added later; a test holds every
		// column of today's tables to the cases above.
		writeString(h, fmt.Sprintf("%T=%v", v, v))
		return false
	}
	h.Write(b[:])
	return true
}

func writeString(h hash.Hash, s string) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(len(s)))
	h.Write(b[:])
	h.Write([]byte(s))
}
