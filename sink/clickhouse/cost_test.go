package clickhouse_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// The history of the cost tests: projects of messages snapshotted once a
// minute up to two minutes before costPassAt, then a pass a minute before
// it and the steady pass at it, half past an hour, so that the passes'
// hour and day hold imported snapshots too.
const (
	costProjects = 20
	costMessages = 10
	costSchedule = "every-1m"
	// The depths compared: 16 times more history at the deeper one. At
	// the shallower, a project holds 10 000 snapshot rows, more than a
	// granule of the snapshot table (8 192 rows), so that a read of the
	// granules around a project's newest rows costs about the same at
	// both depths; a read of its history, or of a share of it, costs 16
	// times as much at the deeper one, whatever the granules, and of the
	// whole of a rollup too.
	costShallow = 1000
	costDeep    = 16000
	// costFloor is the fewest rows a statement is held to: at most a
	// granule of the tables with a row per project snapshot or tick,
	// which a read of one row may cost, whatever the depth.
	costFloor = 1024
)

var costPassAt = time.Date(2026, 5, 20, 12, 30, 0, 0, time.UTC)

// costCreated is every message's create_at: before the deeper history's
// first snapshot, so that every snapshot has an age.
var costCreated = costPassAt.Add(-12 * 24 * time.Hour)

// Every statement of a steady pass, and of the reconcile step that reads
// what it changed, reads what the change needs, not the history stored:
// over a history 16 times deeper, no statement, grouped by its text
// without literals, reads more than 1.2 times the rows it read over the
// shallower one, as the server counts them (its query log, or its
// progress where it keeps none: both count what an INSERT … SELECT read,
// and whole granules). Every view equals its brute force after, from the
// pass's day on.
//
// The refresh of the speeds of the messages a pass wrote (package
// derived's speeds.go) is held to the same rule: it reads each message's
// speed row, not its curve, whose age rows grow with the message's age
// (73 hourly rows, then one a day) and here with the depth, since the
// deeper history's messages were seen younger (2 age rows a message at
// the shallower depth, 60 at the deeper).
func TestEveryStatementReadsWhatItsChangeNeeds(t *testing.T) {
	t.Parallel()
	shallow := measureSteadyPass(t, costShallow)
	deep := measureSteadyPass(t, costDeep)
	t.Logf("rows read by each statement at %d and %d snapshots a message:\n%s", costShallow, costDeep, sinktest.Report(shallow, deep))
	if len(shallow) == 0 || sinktest.TotalOf(shallow) == 0 {
		t.Fatal("the server reported no statement, or no row read")
	}
	for _, text := range sinktest.Grown(shallow, deep, costFloor) {
		t.Errorf("over %d snapshots a message, %d rows read (over 1.2 times the %d over %d) by\n%s",
			costDeep, deep[text], shallow[text], costShallow, text)
	}
	for _, d := range []struct {
		depth int
		reads map[string]uint64
	}{{costShallow, shallow}, {costDeep, deep}} {
		speeds := 0
		for text, n := range d.reads {
			if strings.Contains(text, "FROM db.`"+schema.SpeedRollup+"` FINAL") {
				speeds++
				if n == 0 {
					t.Errorf("over %d snapshots a message, the read of the speed rows read nothing:\n%s", d.depth, text)
				}
			}
		}
		if speeds != 1 {
			t.Errorf("over %d snapshots a message, %d reads of the speed rows, want the pass's refresh's one", d.depth, speeds)
		}
	}
}

// measureSteadyPass imports depth snapshots a message into a fresh
// database of the first release's schema, migrates it (the migrations
// fold the history into every rollup), writes a pass that primes what a
// steady pass builds on and reconciles it, then writes the steady pass
// and runs the reconcile step that reads its changes. It returns what
// the server read for each statement of the steady pass and of its step,
// by text, the step's prefixed with "step: ".
func measureSteadyPass(t *testing.T, depth int) map[string]uint64 {
	t.Helper()
	db := sinktest.New(t)
	historytest.MigrateFirst(t, db.DSN, 1)
	importHistory(t, db, depth)
	costs := sinktest.NewCosts()
	ch := historytest.OpenSink(t, db.DSN, clickhouse.WithReconcileSettle(time.Second), clickhouse.WithIntercept(costs.Wrap))
	ctx := context.Background()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	writeCostPass(t, ch, costPassAt.Add(-time.Minute), depth)
	sinktest.AwaitSettled(t, db.Conn, time.Second)
	if _, err := ch.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	costs.Take()
	writeCostPass(t, ch, costPassAt, depth)
	pass := costs.Take()
	sinktest.AwaitSettled(t, db.Conn, time.Second)
	rep, err := ch.ReconcileStep(ctx, "", 5000)
	if err != nil {
		t.Fatal(err)
	}
	step := costs.Take()
	if rep.ChangedSnapshots != costProjects || rep.LeftToWriters != costProjects || !rep.CaughtUp {
		t.Errorf("the step after the pass: %+v, want the pass's %d project snapshots read, all left to the pass's refresh, and nothing waiting", rep, costProjects)
	}
	costs.Read(t, db.Conn, append(slices.Clone(pass), step...))
	out := sinktest.ByText(pass)
	for text, n := range sinktest.ByText(step) {
		out["step: "+text] += n
	}
	// The views from the pass's day on: checking the whole deep history
	// would take most of this test's time, and the tests of imports
	// (package app's backlog tests) check whole imported histories.
	historytest.AssertVerified(t, ch, costPassAt)
	return out
}

// writeCostPass writes a pass of every project at at, with its run record,
// as a daemon's pass on costSchedule would.
func writeCostPass(t *testing.T, ch *clickhouse.ClickHouse, at time.Time, depth int) {
	t.Helper()
	ctx := context.Background()
	b := sink.Batch{Schedule: costSchedule}
	ts := sink.TimeOf(at)
	version := uint64(at.UnixNano())
	for p := int64(1); p <= costProjects; p++ {
		b.Projects = append(b.Projects, sink.Project{ID: p, NFT: fmt.Sprintf("p%d.eth", p), Name: fmt.Sprintf("Project %d", p), Raw: "{}", FetchedAt: ts, Version: version})
		for m := int64(1); m <= costMessages; m++ {
			// A pass lists each message with its statistics.
			b.Messages = append(b.Messages, sink.Message{ProjectID: p, ID: p*100 + m, Subject: "m", CreateAt: sink.TimeOf(costCreated), FetchedAt: ts, Version: version})
			reads := uint64(depth+int(at.Sub(costPassAt)/time.Minute)+2) * uint64(m)
			b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: p*100 + m, SnapshotAt: ts, FetchedAt: ts,
				ReadCount: reads, Total: 1_000_000, Percent: float64(reads) / 10_000, Version: version})
		}
	}
	if err := ch.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if err := ch.RecordRun(ctx, sink.Run{RunID: at.Format(time.RFC3339), Schedule: costSchedule, Trigger: "cron", SnapshotAt: at,
		StartedAt: at, FinishedAt: at, Status: "ok"}); err != nil {
		t.Fatal(err)
	}
}

// importHistory inserts into the first release's tables, as a hand import
// would, depth snapshots of each message one minute apart up to two
// minutes before costPassAt, with their projects, messages and ticks.
func importHistory(t *testing.T, db *sinktest.DB, depth int) {
	t.Helper()
	ctx := context.Background()
	first := costPassAt.Add(-time.Duration(depth+1) * time.Minute).Unix()
	per := costProjects * costMessages
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s (project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version)
SELECT p, p * 100 + m, toDateTime(%d + 60 * i), (i + 1) * m, 1000000, (i + 1) * m / 10000, toDateTime(%d + 60 * i), 1 + i
FROM (SELECT 1 + intDiv(number %% %d, %d) AS p, 1 + number %% %d AS m, intDiv(number, %d) AS i FROM numbers(%d))`,
			db.Table("message_read_snapshots"), first, first, per, costMessages, costMessages, per, per*depth),
		fmt.Sprintf(`INSERT INTO %s (run_id, schedule, trigger, snapshot_at, started_at, finished_at, status)
SELECT concat('import-', toString(number)), '%s', 'cron', toDateTime(%d + 60 * number), toDateTime(%d + 60 * number), toDateTime(%d + 60 * number), 'ok'
FROM numbers(%d)`, db.Table("sync_runs"), costSchedule, first, first, first, depth),
		fmt.Sprintf(`INSERT INTO %s (project_id, id, subject, create_at, version) SELECT 1 + intDiv(number, %d), (1 + intDiv(number, %d)) * 100 + 1 + number %% %d, 'm', toDateTime(%d), 1 FROM numbers(%d)`,
			db.Table("messages"), costMessages, costMessages, costMessages, costCreated.Unix(), per),
	} {
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// Backfills of the same projects back to back each cost the server what
// it wrote: each refreshes its projects at their tips, and the reconcile
// it runs before it exits leaves alone what it, and the backfills before
// it, refreshed. The fifth reads at most 1.25 times the rows the second
// read (the first refreshes from the stored history, as it finds no tips
// to build on), and from the second on no reconcile recomputes anything.
func TestBackfillsBackToBackCostTheSame(t *testing.T) {
	t.Parallel()
	const projects, messages = 2000, 20
	db := sinktest.New(t)
	costs := sinktest.NewCosts()
	ch := historytest.OpenSink(t, db.DSN, clickhouse.WithReconcileSettle(time.Second), clickhouse.WithIntercept(costs.Wrap))
	ctx := context.Background()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	costs.Take()
	var (
		reads  []uint64
		byText []map[string]uint64
	)
	for i := range 5 {
		// Each starts once the settle delay has passed over the one
		// before, as backfills of real size, which take longer than it,
		// do: the reconcile each runs then reads the changes of the one
		// before as settled, the same way every time.
		sinktest.AwaitSettled(t, db.Conn, time.Second)
		at := costPassAt.Add(time.Duration(i) * time.Minute)
		ts, version := sink.TimeOf(at), uint64(at.UnixNano())
		var b sink.Batch // a backfill's: no schedule
		for p := int64(1); p <= projects; p++ {
			b.Projects = append(b.Projects, sink.Project{ID: p, NFT: fmt.Sprintf("p%d.eth", p), Raw: "{}", FetchedAt: ts, Version: version})
			for m := int64(1); m <= messages; m++ {
				b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: p*100 + m, SnapshotAt: ts, FetchedAt: ts,
					ReadCount: uint64(i) * uint64(m), Total: 1000, Percent: float64(i*int(m)) / 10, Version: version})
			}
		}
		if err := ch.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
		rep, err := ch.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stmts := costs.Take()
		// The server merges each backfill's parts of the latest and tip
		// rollups in the background; backfills as short as these outrun
		// it, and a read of the latest rows and tips reads every part not
		// merged yet. The test merges them, as the server does between
		// backfills of real size, so that the backfills compare what they
		// read, not how far the merges got.
		for _, rollup := range []string{"message_read_latest_rollup", "project_read_tip_rollup"} {
			if err := db.Conn.Exec(ctx, "OPTIMIZE TABLE "+db.Table(rollup)+" FINAL"); err != nil {
				t.Fatal(err)
			}
		}
		costs.Read(t, db.Conn, stmts)
		reads = append(reads, sinktest.Total(stmts))
		byText = append(byText, sinktest.ByText(stmts))
		t.Logf("backfill %d: %+v", i+1, rep)
		if i > 0 && rep.Refreshed != 0 {
			t.Errorf("backfill %d: its reconcile recomputed %d project snapshots, want none: %+v", i+1, rep.Refreshed, rep)
		}
	}
	t.Logf("rows read by each backfill: %v; by statement, the second's and the fifth's:\n%s", reads, sinktest.Report(byText[1], byText[4]))
	if reads[4]*100 > reads[1]*125 {
		t.Errorf("the fifth backfill read %d rows, over 1.25 times the %d the second read", reads[4], reads[1])
	}
	historytest.AssertVerified(t, ch, time.Time{})
}
