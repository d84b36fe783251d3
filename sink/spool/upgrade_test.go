package spool_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

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
	if _, err := os.Stat(filepath.Join(dir, "corrupt")); !os.IsNotExist(err) {
		t.Errorf("corrupt/ still there: %v", err)
	}
	if left := entryNames(t, filepath.Join(dir, "quarantine")); !slices.Equal(left, []string{torn}) {
		t.Errorf("quarantine/ holds %v, want %s", left, torn)
	}

	db, ch := migrated(t)
	ctx := context.Background()
	if n, err := sp.Flush(ctx, ch); n != 2 || err != nil {
		t.Fatalf("flushed %d entries (%v), want both", n, err)
	}
	for table, want := range map[string]uint64{"projects": 2, "messages": 3, "message_read_snapshots": 3} {
		if got := db.Count(t, table); got != want {
			t.Errorf("%s: %d rows, want %d", table, got, want)
		}
	}
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
