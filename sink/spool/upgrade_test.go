package spool_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/spool"
)

// Entries the previous release (0.1.0) spooled, during a backfill of the
// fake upstream's sample names with ClickHouse unreachable, replay into
// the current schema: rows and run record arrive whole.
func TestReplaysPreviousReleaseEntries(t *testing.T) {
	dir := t.TempDir()
	src := "testdata/release-0.1.0"
	des, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, de.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := spool.Open(dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	db := sinktest.New(t)
	dsn, err := chconn.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ch, err := clickhouse.OpenClickHouse(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })

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
