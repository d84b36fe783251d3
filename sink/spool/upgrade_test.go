package spool_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
	"github.com/readsync/readsync/sink/spool"
)

// Entries the previous release (0.1.0) spooled, during a backfill of the
// fake upstream's sample names with ClickHouse unreachable, replay into
// the current schema: rows and run record arrive whole.
func TestReplaysPreviousReleaseEntries(t *testing.T) {
	dir := copyRelease(t, "testdata/release-0.1.0")
	sp, err := spool.Open(dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	db := sinktest.New(t)
	ctx := context.Background()
	ch := historytest.OpenSink(t, db.DSN)

	n, err := sp.Flush(ctx, ch)
	if err != nil || n != 2 {
		t.Fatalf("flushed %d entries (%v), want both", n, err)
	}
	if left := sp.Stats().Entries; left != 0 {
		t.Errorf("%d entries left, want none", left)
	}
	for table, want := range map[string]uint64{"projects": 5, "messages": 8, "message_read_snapshots": 8} {
		if got := db.Count(t, table); got != want {
			t.Errorf("%s: %d rows, want %d", table, got, want)
		}
	}
	var (
		name, nft   string
		created     time.Time
		runID       string
		runAt       time.Time
		runMessages uint64
	)
	if err := db.Conn.QueryRow(ctx, "SELECT name, nft, create_at FROM "+db.Table("projects")+" FINAL WHERE id = 1002").Scan(&name, &nft, &created); err != nil {
		t.Fatal(err)
	}
	if name != "Café ☕ Collective" || nft != "café-☕.eth" || !created.Equal(time.Date(2023, 5, 1, 7, 15, 0, 0, time.UTC)) {
		t.Errorf("project 1002: name %q nft %q create_at %v", name, nft, created)
	}
	if err := db.Conn.QueryRow(ctx, "SELECT run_id, snapshot_at, messages FROM "+db.Table("sync_runs")).Scan(&runID, &runAt, &runMessages); err != nil {
		t.Fatal(err)
	}
	if runID != "01a20159-1306-7cac-96d2-275c9b140532" || !runAt.Equal(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)) || runMessages != 8 {
		t.Errorf("run: %s at %v, %d messages", runID, runAt, runMessages)
	}
	var mismatched uint64
	if err := db.Conn.QueryRow(ctx, "SELECT count() FROM "+db.Table("message_read_snapshots")+" WHERE snapshot_at != toDateTime('2026-01-02 03:00:00', 'UTC')").
		Scan(&mismatched); err != nil || mismatched != 0 {
		t.Errorf("%d snapshots not stamped with the pass's time (%v)", mismatched, err)
	}
	// The entries carry no schedule: their reads are gained all the same,
	// every message new, no tick counted as missed.
	var messages, fresh, missed uint64
	if err := db.Conn.QueryRow(ctx, "SELECT sum(messages), sum(new_messages), sum(missed_ticks) FROM "+db.Table("project_read_gains")).
		Scan(&messages, &fresh, &missed); err != nil || messages != 8 || fresh != 8 || missed != 0 {
		t.Errorf("project_read_gains: %d messages, %d new, %d missed ticks, want 8, 8 and 0 (%v)", messages, fresh, missed, err)
	}
}

// copyRelease copies a spool directory an earlier release left, folders
// included, into a new directory and returns it.
func copyRelease(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(src, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if de.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o750)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Release 0.4.0 left a spool with an entry it could not decode (a write
// the disk lost half of) set aside in corrupt/, and a batch and a run
// record waiting behind it, ClickHouse being down. --check counts the
// set-aside entry as quarantined before anything opens the spool; Open
// moves it into quarantine/, the one folder of entries waiting for an
// operator, and removes the empty corrupt/; the waiting entries replay
// whole; a retry cannot decode the torn entry either and leaves it there.
func TestPreviousReleaseSetAsideIsQuarantined(t *testing.T) {
	dir := copyRelease(t, "testdata/release-0.4.0")
	torn := "01795612989194078259-rows-74fd4db7.json.gz"
	sp := openTwoAndOneQuarantined(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "corrupt")); !os.IsNotExist(err) {
		t.Errorf("corrupt/ still there: %v", err)
	}
	if left := entryNames(t, filepath.Join(dir, "quarantine")); !slices.Equal(left, []string{torn}) {
		t.Errorf("quarantine/ holds %v, want %s", left, torn)
	}

	db, ch := flushBoth(t, sp, map[string]uint64{"projects": 2, "messages": 3, "message_read_snapshots": 3})
	ctx := context.Background()
	var runID string
	if err := db.Conn.QueryRow(ctx, "SELECT run_id FROM "+db.Table("sync_runs")).Scan(&runID); err != nil || runID != "019a9f3c-1e2b-7c55-8f00-5a0d3c2b1a90" {
		t.Errorf("run record %q (%v), want the spooled one", runID, err)
	}
	var schedule string
	if err := db.Conn.QueryRow(ctx, "SELECT any(schedule) FROM "+db.Table("message_read_snapshots")).Scan(&schedule); err != nil || schedule != "hourly" {
		t.Errorf("snapshots' schedule %q (%v), want hourly", schedule, err)
	}
	if n, err := sp.RetryQuarantined(ctx, ch); n != 0 || err != nil {
		t.Errorf("RetryQuarantined = %d, %v; want nothing delivered, no error", n, err)
	}
	if left := entryNames(t, filepath.Join(dir, "quarantine")); !slices.Equal(left, []string{torn}) {
		t.Errorf("after a retry quarantine/ holds %v, want %s still", left, torn)
	}
}

// Release 0.5.0's spool, as that release left it (testdata/release-0.5.0):
// a backfill's run record it moved into quarantine/ after the server
// refused it three times for what it holds (its sync_runs had been
// renamed away), then a pass of schedule hourly, spooled with ClickHouse
// unreachable, whose batch and run record the server then refused once
// each, counted in .refusals.json. --check and the gauge report the
// quarantined entry before and after the waiting ones replay whole; the
// quarantine is kept until a retry, which delivers it now that the cause
// is gone.
func TestRelease050SpoolReplays(t *testing.T) {
	const (
		rows       = "01795896378479006669-rows-044fb139.json.gz"
		run        = "01795896378480698069-run-b72674ae.json.gz"
		quarantine = "01795896363594724587-run-f25292e7.json.gz"
	)
	dir := copyRelease(t, "testdata/release-0.5.0")
	sp := openTwoAndOneQuarantined(t, dir)

	db, ch := flushBoth(t, sp, map[string]uint64{"projects": 5, "messages": 8, "message_read_snapshots": 8})
	ctx := context.Background()
	var runID, schedule string
	if err := db.Conn.QueryRow(ctx, "SELECT run_id, schedule FROM "+db.Table("sync_runs")).Scan(&runID, &schedule); err != nil ||
		runID != "01a223c4-0290-7747-898a-b0396f10c4d4" || schedule != "hourly" {
		t.Errorf("run record %q of schedule %q (%v), want the spooled pass of hourly alone", runID, schedule, err)
	}
	var reads, hourly uint64
	if err := db.Conn.QueryRow(ctx, "SELECT sum(read_count), countIf(schedule = 'hourly') FROM "+db.Table("message_read_snapshots")+" FINAL").
		Scan(&reads, &hourly); err != nil || reads != 2248 || hourly != 8 {
		t.Errorf("snapshots: %d reads, %d of schedule hourly (%v); want 2248 and all 8", reads, hourly, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".refusals.json")); !os.IsNotExist(err) {
		t.Errorf(".refusals.json kept after the entries it counted were delivered: %v", err)
	}
	if left := entryNames(t, dir); len(left) != 0 {
		t.Errorf("entries left: %v", left)
	}
	if left := entryNames(t, filepath.Join(dir, "quarantine")); !slices.Equal(left, []string{quarantine}) {
		t.Errorf("quarantine/ holds %v, want %s", left, quarantine)
	}
	if in, err := spool.Inspect(dir); err != nil || in.Entries != 0 || in.Quarantined != 1 {
		t.Errorf("after the flush Inspect = %+v, %v; want nothing waiting and 1 quarantined", in, err)
	}
	if st := sp.Stats(); st.Entries != 0 || st.Quarantined != 1 {
		t.Errorf("after the flush stats %+v; want nothing waiting and 1 quarantined", st)
	}

	if n, err := sp.RetryQuarantined(ctx, ch); n != 1 || err != nil {
		t.Fatalf("RetryQuarantined = %d, %v; want the run record delivered", n, err)
	}
	runs := sinktest.Lines(t, db.Conn, "SELECT concat(run_id, ' ', trigger, ' ', toString(snapshot_at)) FROM "+db.Table("sync_runs")+" ORDER BY run_id")
	if want := []string{"01a223c3-c860-7970-9e60-62ce53c3c686 backfill 2026-03-02 03:00:00", "01a223c4-0290-7747-898a-b0396f10c4d4 cron 2026-11-28 20:06:18"}; !slices.Equal(runs, want) {
		t.Errorf("sync_runs after the retry: %q, want %q", runs, want)
	}
	if st := sp.Stats(); st.Quarantined != 0 {
		t.Errorf("after the retry %d quarantined, want none", st.Quarantined)
	}
}

// The refusal counts 0.5.0 kept in .refusals.json go on: its run record,
// refused once there, is quarantined at the current release's second
// refusal of it, once the batch before it was delivered, and not at the
// third.
func TestRelease050RefusalCountsGoOn(t *testing.T) {
	const run = "01795896378480698069-run-b72674ae.json.gz"
	dir := copyRelease(t, "testdata/release-0.5.0")
	sp, err := spool.Open(dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	db, ch := migrated(t)
	exec(t, db, "RENAME TABLE {db}.sync_runs TO {db}.sync_runs_aside")
	ctx := context.Background()
	if n, err := sp.Flush(ctx, ch); n != 1 || err != nil {
		t.Fatalf("first flush = %d, %v; want the batch delivered and the run record refused", n, err)
	}
	if left := entryNames(t, dir); !slices.Equal(left, []string{run}) {
		t.Fatalf("after the first flush the spool holds %v, want %s", left, run)
	}
	if n, err := sp.Flush(ctx, ch); n != 0 || err != nil {
		t.Fatalf("second flush = %d, %v; want the run record refused again", n, err)
	}
	if left := entryNames(t, filepath.Join(dir, "quarantine")); !slices.Contains(left, run) {
		t.Errorf("after 0.5.0's refusal and two of this release quarantine/ holds %v, want %s", left, run)
	}
	if st := sp.Stats(); st.Entries != 0 || st.Quarantined != 2 {
		t.Errorf("stats %+v; want nothing waiting and both run records quarantined", st)
	}
}

// openTwoAndOneQuarantined opens the spool dir of an earlier release,
// which --check (Inspect, before anything opens it) and the spool's
// stats must both count as two entries waiting and one quarantined.
// flushBoth flushes the two entries waiting in sp into a new database,
// migrated, and checks that its tables then hold counts rows.
func flushBoth(t *testing.T, sp *spool.Spool, counts map[string]uint64) (*sinktest.DB, *clickhouse.ClickHouse) {
	t.Helper()
	db, ch := migrated(t)
	if n, err := sp.Flush(context.Background(), ch); n != 2 || err != nil {
		t.Fatalf("flushed %d entries (%v), want both", n, err)
	}
	for table, want := range counts {
		if got := db.Count(t, table); got != want {
			t.Errorf("%s: %d rows, want %d", table, got, want)
		}
	}
	return db, ch
}

func openTwoAndOneQuarantined(t *testing.T, dir string) *spool.Spool {
	t.Helper()
	in, err := spool.Inspect(dir)
	if err != nil || in.Entries != 2 || in.Quarantined != 1 {
		t.Fatalf("Inspect = %+v, %v; want 2 entries waiting and 1 quarantined", in, err)
	}
	sp, err := spool.Open(dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	if st := sp.Stats(); st.Entries != 2 || st.Quarantined != 1 {
		t.Errorf("stats %+v; want 2 entries waiting and 1 quarantined", st)
	}
	return sp
}
