package clickhouse_test

import (
	"context"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/derived"
)

// Rows that reach message_read_snapshots without readsync's refresh (a
// process killed between its INSERT and the refresh, a process of an
// earlier release, rows inserted by hand), and ticks recorded after the
// gains around them were computed, leave views stale until the next
// reconcile, which finds them in the changes the server recorded and
// refreshes them; a reconcile of what is current rewrites nothing.
func TestReconcileRefreshesWhatChanged(t *testing.T) {
	ch, db := openTestSink(t)
	ctx := context.Background()
	h := newHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.pass(day.Add(4 * time.Hour))
	h.pass(day.Add(8 * time.Hour))
	reconcile := func() derived.ReconcileReport {
		t.Helper()
		rep, err := ch.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := reconcile(); rep.ChangedSnapshots == 0 || rep.Rewritten != 0 {
		t.Errorf("reconcile after passes refreshed at once: %+v, want the passes' snapshots read and no row rewritten", rep)
	}

	// By hand: a pass at 16:00 whose refresh never ran, and one at 12:00
	// (a replay written late: 16:00's previous snapshot), and the tick
	// of 20:00 recorded as missed, inside the interval of a snapshot
	// written at 24:00.
	for _, at := range []time.Duration{16, 12} {
		for p := int64(1); p <= historyProjects; p++ {
			b := h.fetch(p, day.Add(at*time.Hour), h.nextVersion())
			insertDirect(t, db, b)
		}
	}
	h.pass(day.Add(24 * time.Hour))
	h.recordTick(day.Add(20*time.Hour), "missed")
	rep, err := ch.Verify(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clean() {
		t.Fatal("the views are current before the reconcile: the test writes nothing they miss")
	}
	rep2 := reconcile()
	if rep2.Rewritten == 0 || rep2.ChangedTicks == 0 {
		t.Errorf("reconcile: %+v, want rows rewritten and the late tick read", rep2)
	}
	assertVerified(t, ch, time.Time{})
	if rep := reconcile(); rep.Rewritten != 0 {
		t.Errorf("a second reconcile rewrote %d rows of what was current", rep.Rewritten)
	}
}
