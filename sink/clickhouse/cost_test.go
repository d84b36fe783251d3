package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// The history of the cost tests: projects of messages snapshotted once a
// minute up to costPassAt, then a pass at costPassAt.
const (
	costProjects = 10
	costMessages = 10
	costSchedule = "every-1m"
)

var costPassAt = time.Date(2026, 5, 20, 12, 0, 0, 0, time.UTC)

// costs are what the server read for a steady pass's refreshes and for
// the reconcile step that reads the pass's changes after it.
type costs struct{ pass, step uint64 }

// A pass, and the reconcile step that reads what it changed, cost the
// server what the pass wrote, not the history stored: over a history of
// 4 000 snapshots a message they read at most 1.2 times the rows they
// read over 1 000, as the server counts them (whole granules), and every
// view equals its brute force after, from the pass's day on.
func TestPassReadsFollowTheChange(t *testing.T) {
	t.Parallel()
	shallow := measurePass(t, 1000)
	deep := measurePass(t, 4000)
	t.Logf("rows read at 1 000 snapshots a message: pass %d, reconcile step %d; at 4 000: pass %d, step %d",
		shallow.pass, shallow.step, deep.pass, deep.step)
	if shallow.pass == 0 || shallow.step == 0 {
		t.Fatalf("the server reported no rows read: %+v", shallow)
	}
	if deep.pass*10 > shallow.pass*12 {
		t.Errorf("a pass over 4 000 snapshots a message read %d rows, over 1.2 times the %d it read over 1 000", deep.pass, shallow.pass)
	}
	if deep.step*10 > shallow.step*12 {
		t.Errorf("its reconcile step over 4 000 snapshots a message read %d rows, over 1.2 times the %d it read over 1 000", deep.step, shallow.step)
	}
}

// measurePass imports depth snapshots a message into a fresh database,
// one a minute before costPassAt, drains the reconcile, then writes a
// pass at costPassAt and runs the step that reads its changes, and returns
// what the server read for each.
func measurePass(t *testing.T, depth int) costs {
	t.Helper()
	db := sinktest.New(t)
	ch := historytest.OpenSettled(t, db)
	ctx := context.Background()
	importHistory(t, db, depth)
	if _, err := ch.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	var b sink.Batch
	at := sink.TimeOf(costPassAt)
	for p := int64(1); p <= costProjects; p++ {
		b.Projects = append(b.Projects, sink.Project{ID: p, NFT: fmt.Sprintf("p%d.eth", p), Name: fmt.Sprintf("Project %d", p), Raw: "{}", FetchedAt: at, Version: 1 << 40})
		for m := int64(1); m <= costMessages; m++ {
			reads := uint64(depth) * uint64(m)
			b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: p*100 + m, SnapshotAt: at, FetchedAt: at,
				ReadCount: reads, Total: 1_000_000, Percent: float64(reads) / 10_000, Version: 1<<40 + uint64(m)})
		}
	}
	b.Schedule = costSchedule
	pctx, passReads := sink.CountReads(ctx)
	if err := ch.Write(pctx, &b); err != nil {
		t.Fatal(err)
	}
	if err := ch.RecordRun(ctx, sink.Run{RunID: "steady", Schedule: costSchedule, Trigger: "cron", SnapshotAt: costPassAt,
		StartedAt: costPassAt, FinishedAt: costPassAt, Status: "ok"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // the settle delay, in whole seconds
	rep, err := ch.ReconcileStep(ctx, "", 5000)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ChangedSnapshots != costProjects || !rep.CaughtUp {
		t.Fatalf("the step after the pass: %+v, want the pass's %d project snapshots read and nothing waiting", rep, costProjects)
	}
	// The views from the pass's day on: checking the whole deep history
	// would take most of this test's time, and the tests of imports
	// (package app's backlog tests) check whole imported histories.
	historytest.AssertVerified(t, ch, costPassAt)
	return costs{pass: passReads.Rows(), step: rep.ReadRows}
}

// importHistory inserts, as a hand import would, depth snapshots of each
// message one minute apart up to a minute before costPassAt, with their
// projects, messages and ticks.
func importHistory(t *testing.T, db *sinktest.DB, depth int) {
	t.Helper()
	ctx := context.Background()
	first := costPassAt.Add(-time.Duration(depth) * time.Minute).Unix()
	per := costProjects * costMessages
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s (project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version, schedule)
SELECT p, p * 100 + m, toDateTime(%d + 60 * i), i * m, 1000000, i * m / 10000, toDateTime(%d + 60 * i), 1 + i, '%s'
FROM (SELECT 1 + intDiv(number %% %d, %d) AS p, 1 + number %% %d AS m, intDiv(number, %d) AS i FROM numbers(%d))`,
			db.Table("message_read_snapshots"), first, first, costSchedule, per, costMessages, costMessages, per, per*depth),
		fmt.Sprintf(`INSERT INTO %s (run_id, schedule, trigger, snapshot_at, started_at, finished_at, status)
SELECT concat('import-', toString(number)), '%s', 'cron', toDateTime(%d + 60 * number), toDateTime(%d + 60 * number), toDateTime(%d + 60 * number), 'ok'
FROM numbers(%d)`, db.Table("sync_runs"), costSchedule, first, first, first, depth),
		fmt.Sprintf(`INSERT INTO %s (project_id, id, subject, version) SELECT 1 + intDiv(number, %d), (1 + intDiv(number, %d)) * 100 + 1 + number %% %d, 'm', 1 FROM numbers(%d)`,
			db.Table("messages"), costMessages, costMessages, costMessages, per),
	} {
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	time.Sleep(2100 * time.Millisecond) // the settle delay, in whole seconds
}
