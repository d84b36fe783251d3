package clickhouse_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
)

// assertVerified fails t when Verify finds a view that differs from its
// brute force, naming every row that does.
func assertVerified(t *testing.T, ch *clickhouse.ClickHouse, since time.Time) derived.VerifyReport {
	t.Helper()
	rep, err := ch.Verify(context.Background(), since)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Views {
		if v.Differs() {
			t.Errorf("%s differs from its brute force:\n%s", v.View, describeDiff(v))
		}
	}
	return rep
}

func describeDiff(v derived.ViewDiff) string {
	var b strings.Builder
	for _, d := range v.Missing {
		fmt.Fprintf(&b, "  missing %s: %s\n", d.Key, d.Want)
	}
	for _, d := range v.Extra {
		fmt.Fprintf(&b, "  extra   %s: %s\n", d.Key, d.Got)
	}
	for _, d := range v.Wrong {
		fmt.Fprintf(&b, "  wrong   %s:\n    got  %s\n    want %s\n", d.Key, d.Got, d.Want)
	}
	return b.String()
}

// Verify's brute force agrees with the views over the generated history,
// whole and from a day in its middle, and each has rows in every view:
// a check that compared nothing would pass too.
func TestVerifyFindsTheViewsRight(t *testing.T) {
	ch, _ := openTestSink(t)
	newHistory(t, ch).generate(true)
	for _, since := range []time.Time{{}, time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC)} {
		rep := assertVerified(t, ch, since)
		if len(rep.Views) != len(schema.Views()) {
			t.Fatalf("%d views verified, want %d", len(rep.Views), len(schema.Views()))
		}
		for _, v := range rep.Views {
			if v.Rows == 0 {
				t.Errorf("since %s: %s has no rows to compare", since, v.View)
			}
		}
	}
}

// Each kind of difference, written by hand into a rollup, is found in the
// view it shows in, with its key, and Repair mends it.
func TestVerifyFindsAndRepairsEachDifference(t *testing.T) {
	ch, db := openTestSink(t)
	ctx := context.Background()
	h := newHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 6 {
		h.pass(day.Add(time.Duration(4*i) * time.Hour))
	}
	assertVerified(t, ch, time.Time{})
	exec := func(q string) {
		t.Helper()
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	await := func(table string) {
		t.Helper()
		for range 300 {
			if got := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT toString(count()) FROM system.mutations WHERE database = '%s' AND table = '%s' AND is_done = 0", db.Name, table)); got[0] == "0" {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("the deletion from %s did not finish", table)
	}
	// A missing row: project 1's day in the day rollup.
	exec("ALTER TABLE " + db.Table("project_read_day_rollup") + " DELETE WHERE project_id = 1")
	await("project_read_day_rollup")
	// A wrong value: project 2's gains at 08:00, with a key that outranks
	// every refresh.
	exec(fmt.Sprintf(`INSERT INTO %s (project_id, snapshot_at, gain_key, gain_prev_at, gain_messages, gain_new_messages, gain_reads,
    gain_missed_ticks, gain_schedule, gain_snap_messages, gain_snap_reads, gain_snap_total)
SELECT 2, toDateTime('2026-03-01 08:00:00', 'UTC'), '9', toDateTime('2026-03-01 04:00:00', 'UTC'), 5, 0, 12345, 0, '', 5, 1, 2`, db.Table("project_read_gain_rollup")))
	// An extra row: a message nobody wrote, in the latest rollup.
	exec(fmt.Sprintf("INSERT INTO %s (project_id, message_id, latest_row) SELECT toInt64(3), toInt64(999), latest_row FROM %s WHERE project_id = 3 AND message_id = 301",
		db.Table("message_read_latest_rollup"), db.Table("message_read_latest_rollup")))

	rep, err := ch.Verify(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, v := range rep.Views {
		found[v.View] = describeDiff(v)
	}
	for view, want := range map[string]string{
		"project_read_daily":     "missing project_id=1 day=2026-03-01",
		"project_read_gains":     "wrong   project_id=2 snapshot_at=2026-03-01T08:00:00Z",
		"project_read_snapshots": "wrong   project_id=2 snapshot_at=2026-03-01T08:00:00Z",
		"message_read_latest":    "extra   project_id=3 message_id=999",
	} {
		if !strings.Contains(found[view], want) {
			t.Errorf("%s: the report lacks %q:\n%s", view, want, found[view])
		}
	}
	if rep.Clean() {
		t.Fatal("the report is clean")
	}
	if err := ch.Repair(ctx, rep); err != nil {
		t.Fatal(err)
	}
	assertVerified(t, ch, time.Time{})
}
