package derived_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/schema/migrate"
	"github.com/readsync/readsync/sink/schema/resort"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// execScript runs the statements of a script of testdata (see
// sinktest.SplitScript) in db.
func execScript(t *testing.T, db *sinktest.DB, file string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range sinktest.SplitScript(string(src), db.Name) {
		if err := db.Conn.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v\n%.300s", file, err, stmt)
		}
	}
}

// TestUpgradeFrom0_5 upgrades a database at release 0.5.0's schema
// (migrations 1 to 8, its snapshots sorted by message first) holding the
// history 0.5.0 wrote (testdata/release-0.5.0): every migration since
// applies, every row is kept, the reconcile 0.5.0 left half done goes on
// and every view equals its brute force; then the snapshots move onto
// the current sort key, and every row and view is still what it was.
func TestUpgradeFrom0_5(t *testing.T) {
	t.Parallel()
	db := sinktest.New(t)
	ctx := context.Background()
	// The database, as migration 1 creates it, then the tables 0.5.0
	// created otherwise than the migrations now do.
	if err := db.Conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS `"+db.Name+"`"); err != nil {
		t.Fatal(err)
	}
	execScript(t, db, "testdata/release-0.5.0/tables.sql")
	historytest.MigrateFirst(t, db.DSN, 8)
	sortKey := func() []string {
		return sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT sorting_key FROM system.tables WHERE database = '%s' AND name = 'message_read_snapshots'", db.Name))
	}
	if got := sortKey(); !slices.Equal(got, []string{"project_id, message_id, snapshot_at"}) {
		t.Fatalf("0.5.0's message_read_snapshots has the sort key %q", got)
	}
	execScript(t, db, "testdata/release-0.5.0/rows.sql")

	// Every row 0.5.0 wrote, each table's rows as text (the tables that
	// keep a row's last version, as they are read: FINAL, which a merge
	// does not change): they must all be there after the upgrade, and
	// after the move.
	tables := map[string]string{
		"projects":               "concat(toString(id), ' ', nft, ' ', name, ' ', toString(version))",
		"messages":               "concat(toString(project_id), ' ', toString(id), ' ', subject, ' ', toString(version))",
		"message_read_snapshots": "concat(toString(project_id), ' ', toString(message_id), ' ', toString(toUInt32(snapshot_at)), ' ', toString(read_count), ' ', schedule, ' ', toString(version))",
		"sync_runs":              "concat(run_id, ' ', schedule, ' ', trigger, ' ', toString(toUInt32(snapshot_at)), ' ', status)",
	}
	rows := func() map[string][]string {
		out := map[string][]string{}
		for table, row := range tables {
			final := " FINAL"
			if table == "sync_runs" {
				final = ""
			}
			out[table] = sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT %s FROM %s%s", row, db.Table(table), final))
			slices.Sort(out[table])
		}
		return out
	}
	before := rows()
	for table, want := range map[string]uint64{"projects": 5, "messages": 8, "message_read_snapshots": 48} {
		if got := db.Count(t, table); got != want {
			t.Fatalf("0.5.0's %s: %d rows, want %d", table, got, want)
		}
	}
	if got := len(before["sync_runs"]); got != 7 {
		t.Fatalf("0.5.0's sync_runs: %d runs, want its 7 backfills", got)
	}

	opts := []clickhouse.Option{clickhouse.WithReconcileSettle(time.Second),
		clickhouse.WithResort(resort.Options{Settle: time.Second, StepRows: 40, Lease: migrate.Lease(10 * time.Second)})}
	ch := historytest.OpenSink(t, db.DSN, opts...)
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		after := rows()
		for table, want := range before {
			if !slices.Equal(after[table], want) {
				t.Errorf("%s: %s holds\n%q\nwant 0.5.0's\n%q", when, table, after[table], want)
			}
		}
		sinktest.AwaitSettled(t, db.Conn, time.Second) // WithReconcileSettle
		if _, err := ch.Reconcile(ctx); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		rep := historytest.AssertVerified(t, ch, time.Time{})
		if len(rep.Views) == 0 {
			t.Errorf("%s: --verify compared no view", when)
		}
	}
	check("after the migrations")

	for i := 0; ; i++ {
		if i > 200 {
			t.Fatal("the move did not end in 200 steps")
		}
		rep, err := ch.ResortStep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Done {
			break
		}
		time.Sleep(rep.Wait)
	}
	if got := sortKey(); !slices.Equal(got, []string{"project_id, snapshot_at, message_id"}) {
		t.Errorf("after the move, message_read_snapshots has the sort key %q", got)
	}
	check("after the move")
}
