package chconn

import (
	"crypto/sha256"

	"github.com/readsync/readsync/sink"
)

// InsertToken exposes insertToken to the tests of package chconn_test.
func InsertToken[R any](t Table[R], b *sink.Batch, rows []R) string { return insertToken(t, b, rows) }

// EncodesValue reports whether an INSERT's token has an encoding of its
// own for v, for the tests of package chconn_test.
func EncodesValue(v any) bool {
	w := tokenWriter{h: sha256.New()}
	return w.value(v)
}
