package sync

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/readsync/readsync/apiclient"
)

// The rows of one project share one copy of a value its messages repeat,
// and a project whose values never repeat keeps a bounded table.
func TestRowBuilderSharesRepeatedStrings(t *testing.T) {
	b := newRowBuilder(time.UTC, time.Now(), time.Now(), 1)
	decoded := func(s string) string { return string([]byte(s)) } // a fresh copy, as the decoder makes
	first := b.message(1, apiclient.Message{ID: 1, Sender: decoded("a.eth"), RecvGroup: decoded("holders")})
	for i := range 3 * maxInterned {
		m := b.message(1, apiclient.Message{ID: int64(i + 2), Sender: decoded("a.eth"), RecvGroup: decoded("holders"),
			Subject: decoded(fmt.Sprint("subject ", i))})
		if unsafe.StringData(m.Sender) != unsafe.StringData(first.Sender) ||
			unsafe.StringData(m.RecvGroup) != unsafe.StringData(first.RecvGroup) {
			t.Fatalf("message %d holds its own copy of sender or receiver group", m.ID)
		}
		if m.Sender != "a.eth" || m.RecvGroup != "holders" {
			t.Fatalf("message %d: sender %q, group %q", m.ID, m.Sender, m.RecvGroup)
		}
	}
	for i := range 3 * maxInterned {
		b.message(1, apiclient.Message{Sender: fmt.Sprint("sender ", i)})
	}
	if len(b.interned) > maxInterned {
		t.Errorf("%d strings kept, want at most %d", len(b.interned), maxInterned)
	}
}
