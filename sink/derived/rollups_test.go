package derived_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
	"github.com/readsync/readsync/sink/spool"
)

// TestViewsEqualBruteForce writes generated history through the sink and
// compares every view with the brute-force argMax over the whole snapshot
// history, exactly.
func TestViewsEqualBruteForce(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	historytest.CreateBruteForceViews(t, db)
	historytest.NewHistory(t, ch).Generate(false)
	historytest.AssertViewsEqualBruteForce(t, db, 3, historytest.AllViews...)
	// Merges change how the rollups' rows are stored, never what the views
	// return.
	for _, table := range []string{"message_read_snapshots", "message_read_latest_rollup", "message_read_daily_rollup", "project_read_snapshot_rollup"} {
		if err := db.Conn.Exec(context.Background(), "OPTIMIZE TABLE "+db.Table(table)+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	historytest.AssertViewsEqualBruteForce(t, db, 3, historytest.AllViews...)
}

// TestViewsEqualBruteForceRedelivered delivers one write twice, as a
// spool replay of an INSERT that reached the server does. Every view picks
// one row per key (the per-snapshot view a refresh of the newest write,
// not a sum), so all of them stay exact, whether the server drops the
// repeated INSERT by its token (current releases) or keeps it (18.16).
func TestViewsEqualBruteForceRedelivered(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	historytest.CreateBruteForceViews(t, db)
	historytest.NewHistory(t, ch).Generate(true)
	historytest.AssertViewsEqualBruteForce(t, db, 1, historytest.AllViews...)
}

// A spool entry whose INSERT reached the server but whose answer was lost
// is replayed with the same rows: every view counts it once, on a server
// that drops the repeat by its deduplication token and on 18.16, which
// keeps it.
func TestSpoolReplayOfADeliveredEntry(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	at := sink.TimeOf(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	b := sink.Batch{Projects: []sink.Project{{ID: 1, NFT: "p.eth", Name: "P", CreateAt: at, FetchedAt: at, Version: 7}}}
	for m := int64(1); m <= 3; m++ {
		b.Messages = append(b.Messages, sink.Message{ProjectID: 1, ID: m, Subject: "s", CreateAt: at, FetchedAt: at, Version: 7})
		b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: 1, MessageID: m, SnapshotAt: at, ReadCount: uint64(10 * m), Total: 100, Percent: float64(10 * m), FetchedAt: at, Version: 7})
	}
	sp, err := spool.Open(t.TempDir(), 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	if err := sp.PutBatch(&b); err != nil {
		t.Fatal(err)
	}
	if err := ch.Write(ctx, &b); err != nil { // the first attempt reached the server
		t.Fatal(err)
	}
	if n, err := sp.Flush(ctx, ch); err != nil || n != 1 { // and its entry is replayed
		t.Fatalf("flushed %d entries: %v", n, err)
	}
	want := "3\t60\t300"
	got := sinktest.Lines(t, db.Conn, "SELECT arrayStringConcat([toString(messages), toString(reads), toString(total)], '\t') FROM "+db.Table("project_read_snapshots"))
	if strings.Join(got, "\n") != want {
		t.Errorf("project_read_snapshots after a replay of a delivered entry: %q, want %q", got, want)
	}
	for view, q := range map[string]string{
		"message_read_latest":      "SELECT toString(sum(read_count)) FROM " + db.Table("message_read_latest"),
		"project_read_daily":       "SELECT toString(reads) FROM " + db.Table("project_read_daily"),
		"project_read_gains":       "SELECT toString(reads_gained) FROM " + db.Table("project_read_gains"),
		"project_read_daily_gains": "SELECT toString(reads_gained) FROM " + db.Table("project_read_daily_gains"),
	} {
		if got := sinktest.Lines(t, db.Conn, q); strings.Join(got, "") != "60" {
			t.Errorf("%s after a replay: %q, want 60", view, got)
		}
	}
	if n := db.Count(t, "message_read_snapshots"); n != 3 {
		t.Errorf("%d snapshot rows under FINAL, want 3", n)
	}
}

// TestFoldPreviousRelease upgrades a database written by 0.1.0:
// its history is folded into the rollups at migration, a partition at a
// time with progress in the log, and the views then equal the brute force
// over all of it, old rows and new.
func TestFoldPreviousRelease(t *testing.T) {
	db := sinktest.New(t)
	ctx := context.Background()
	for _, stmt := range sinktest.FirstReleaseSchema(t, db.Name) {
		if err := db.Conn.Exec(sinktest.PreviousRelease(ctx, t, db.Conn), stmt); err != nil {
			t.Fatalf("%v\n%s", err, stmt)
		}
	}
	var logs bytes.Buffer
	ch := historytest.OpenSink(t, db.DSN, clickhouse.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	// 0.1.0 wrote the history: its tables take the same
	// INSERTs. Writing migrates, so the history goes in before.
	old := historytest.NewHistory(t, nil)
	var rows []sink.Batch
	for i := 0; i < 12; i++ {
		// Two months, so that the fold has two partitions.
		at := time.Date(2026, 2, 27, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 8 * time.Hour)
		for p := int64(1); p <= historytest.Projects; p++ {
			rows = append(rows, old.Fetch(p, at, old.NextVersion()))
		}
	}
	for _, b := range rows {
		historytest.InsertDirect(t, db, b)
	}

	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"partition=202602 done=1 of=2", "partition=202603 done=2 of=2"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not report the fold of a partition (%s):\n%s", want, logs.String())
		}
	}
	// Writes after the upgrade go through the materialized views.
	h := historytest.NewHistory(t, ch)
	h.Version = old.Version
	h.Reads = old.Reads
	h.Pass(time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC))
	h.Pass(time.Date(2026, 3, 2, 4, 0, 0, 0, time.UTC))

	historytest.CreateBruteForceViews(t, db)
	historytest.AssertViewsEqualBruteForce(t, db, 2, historytest.AllViews...)
	historytest.AssertGainsEqualBruteForce(t, db, historytest.Schedule, 2)

	// A second start finds the rollups current and folds nothing again.
	logs.Reset()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "fold") {
		t.Errorf("a second migration folded again:\n%s", logs.String())
	}
	// A step that ran but was not recorded (the process died in between)
	// runs again: folding the history a second time changes nothing.
	if err := db.Conn.Exec(ctx, "TRUNCATE TABLE "+db.Table("schema_migrations")); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "folded snapshot partition") {
		t.Fatalf("the step did not run again:\n%s", logs.String())
	}
	historytest.AssertViewsEqualBruteForce(t, db, 2, historytest.AllViews...)
	historytest.AssertGainsEqualBruteForce(t, db, historytest.Schedule, 2)
}

// TestDayRefreshesLandInAnyOrder lands a refresh of a project's day that
// saw fewer rows after one that saw more, as two writers racing would: the
// day's values stay those of the refresh that saw more.
func TestDayRefreshesLandInAnyOrder(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	historytest.CreateBruteForceViews(t, db)
	ctx := context.Background()
	h := historytest.NewHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.Pass(day.Add(8 * time.Hour))
	if err := db.Conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s AS %s", db.Table("stale"), db.Table("project_read_day_rollup"))); err != nil {
		t.Fatal(err)
	}
	if err := db.Conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT * FROM %s", db.Table("stale"), db.Table("project_read_day_rollup"))); err != nil {
		t.Fatal(err)
	}
	h.Deleted[[2]int64{1, 1}] = true // the later pass lists one message fewer
	h.Pass(day.Add(20 * time.Hour))
	// A pass at the same snapshot, fetched again: same messages, newer
	// versions.
	h.Pass(day.Add(20 * time.Hour))
	if err := db.Conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT * FROM %s", db.Table("project_read_day_rollup"), db.Table("stale"))); err != nil {
		t.Fatal(err)
	}
	historytest.AssertViewsEqualBruteForce(t, db, 1, "project_read_daily")
}
