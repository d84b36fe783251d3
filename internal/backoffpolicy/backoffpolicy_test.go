package backoffpolicy_test

import (
	"testing"
	"time"

	"github.com/readsync/readsync/internal/backoffpolicy"
)

// Waits double from the first one, with up to half of it as jitter either
// way, and never pass the cap.
func TestWaitsDoubleUpToTheCap(t *testing.T) {
	b := backoffpolicy.New(100 * time.Millisecond)
	want := 100 * time.Millisecond
	for i := range 12 {
		got := b.NextBackOff()
		if lo, hi := want/2, want+want/2; got < lo || got > hi {
			t.Fatalf("wait %d is %s, want %s to %s", i, got, lo, hi)
		}
		want = min(2*want, backoffpolicy.MaxInterval)
	}
}
