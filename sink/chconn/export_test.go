package chconn

import (
	"crypto/sha256"

	"github.com/readsync/readsync/sink"
)

// InsertToken exposes insertToken to the tests of package chconn_test.
func InsertToken[R any](t Table[R], b *sink.Batch, rows []R) string {
	return insertToken(t, b, sliceRows(rows))
}

// EncodesValue reports whether an INSERT's token has an encoding of its
// own for v, for the tests of package chconn_test.
func EncodesValue(v any) bool {
	w := tokenWriter{h: sha256.New()}
	return w.value(v)
}

// ServerKnowing is a server that knows the settings names, for the tests
// of package chconn_test.
func ServerKnowing(names ...string) Server { return Server{has: names} }

// PinnedSettings exposes Server.pinned to the tests of package chconn_test.
func PinnedSettings(s Server) map[string]any { return s.pinned() }

// PinnedInsertSettings lists the settings every INSERT of rows sets where
// the server knows them, by name, for the tests of package chconn_test.
func PinnedInsertSettings() map[string]int {
	out := map[string]int{}
	for _, p := range pinnedInsertSettings() {
		out[p.name] = p.value
	}
	return out
}
