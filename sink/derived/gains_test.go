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
)

// TestGainsEqualBruteForce writes the generated history (a tick run twice,
// a retried list, a spool replay delivered twice, a backfill in the past,
// a message that appears mid-history, one that stops being listed, one
// listed again after two days, one left out of a single list, a missed
// tick) and compares the gains
// views with the brute force, before and after every table is merged.
func TestGainsEqualBruteForce(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	historytest.NewHistory(t, ch).Generate(true)
	historytest.AssertGainsEqualBruteForce(t, db, historytest.Schedule, 2)

	// The history has what the test claims: a missed tick flagged, new
	// messages after the first pass, a gain spanning a message's absence.
	for what, q := range map[string]string{
		"an interval spanning the missed tick": "SELECT toString(count()) FROM " + db.Table("project_read_gains") + " WHERE missed_ticks = 1",
		"a message new after the first pass":   "SELECT toString(count()) FROM " + db.Table("project_read_gains") + " WHERE new_messages > 0 AND prev_snapshot_at IS NOT NULL",
	} {
		if got := sinktest.Lines(t, db.Conn, q); len(got) != 1 || got[0] == "0" {
			t.Errorf("no row with %s: the fixture is wrong", what)
		}
	}
	for _, table := range []string{"message_read_snapshots", "message_read_daily_rollup", "message_read_first_rollup", "project_read_gain_rollup",
		"project_read_day_gain_rollup"} {
		if err := db.Conn.Exec(context.Background(), "OPTIMIZE TABLE "+db.Table(table)+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	historytest.AssertGainsEqualBruteForce(t, db, historytest.Schedule, 2)
}

// TestGainsFoldedAtUpgradeFrom0_2 upgrades a database at 0.2.0's schema
// (migrations 1 and 2) holding that release's history:
// the history's gains are computed at migration, and the gains of the
// passes written after extend them exactly.
func TestGainsFoldedAtUpgradeFrom0_2(t *testing.T) {
	db := sinktest.New(t)
	ctx := context.Background()
	var logs bytes.Buffer
	ch := historytest.OpenSink(t, db.DSN, clickhouse.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	historytest.MigrateFirst(t, db.DSN, 2)
	old := historytest.NewHistory(t, nil)
	for i := 0; i < 9; i++ {
		at := time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 8 * time.Hour)
		if i == 4 {
			old.Deleted[[2]int64{2, 2}] = true
		}
		for p := int64(1); p <= historytest.Projects; p++ {
			historytest.InsertDirect(t, db, old.Fetch(p, at, old.NextVersion()))
		}
	}
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "computed reads gained") {
		t.Errorf("the log does not report the fold of reads gained:\n%s", logs.String())
	}
	historytest.AssertGainsEqualBruteForce(t, db, historytest.Schedule, 2)

	h := historytest.NewHistory(t, ch)
	h.Version, h.Reads, h.Deleted = old.Version, old.Reads, old.Deleted
	h.Pass(time.Date(2026, 4, 2, 8, 0, 0, 0, time.UTC))
	h.RecordTick(time.Date(2026, 4, 2, 12, 0, 0, 0, time.UTC), "skipped")
	h.Pass(time.Date(2026, 4, 2, 16, 0, 0, 0, time.UTC))
	historytest.AssertGainsEqualBruteForce(t, db, historytest.Schedule, 2)
	if got := sinktest.Lines(t, db.Conn, "SELECT toString(sum(missed_ticks)) FROM "+db.Table("project_read_gains")); len(got) != 1 || got[0] != fmt.Sprint(historytest.Projects) {
		t.Errorf("missed ticks after one skipped tick: %v, want one per project", got)
	}
}

// TestGainRefreshesLandInAnyOrder lands the refreshes of a snapshot that
// saw fewer rows after those that saw more, as racing writers would: the
// views keep the values of the refreshes that saw more.
func TestGainRefreshesLandInAnyOrder(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	h := historytest.NewHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.Pass(day.Add(8 * time.Hour))
	h.Pass(day.Add(12 * time.Hour))
	rollups := []string{"project_read_gain_rollup", "project_read_day_gain_rollup"}
	for _, r := range rollups {
		for _, q := range []string{"CREATE TABLE %[1]s AS %[2]s", "INSERT INTO %[1]s SELECT * FROM %[2]s"} {
			if err := db.Conn.Exec(ctx, fmt.Sprintf(q, db.Table("stale_"+r), db.Table(r))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The 12:00 tick run again with newer versions, a backfill at 10:00
	// between the two, and a tick at 16:00 that lists a message fewer.
	h.Pass(day.Add(12 * time.Hour))
	for p := int64(1); p <= historytest.Projects; p++ {
		b := h.Fetch(p, day.Add(10*time.Hour), h.NextVersion())
		h.Write(&b)
	}
	h.Deleted[[2]int64{1, 1}] = true
	h.Pass(day.Add(16 * time.Hour))
	for _, r := range rollups {
		if err := db.Conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT * FROM %s", db.Table(r), db.Table("stale_"+r))); err != nil {
			t.Fatal(err)
		}
	}
	historytest.AssertGainsEqualBruteForce(t, db, historytest.Schedule, 1)
}

// A project fetched again after more than a week is not new: its messages'
// previous rows are found however far back they are.
func TestGainsAfterALongAbsence(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	h := historytest.NewHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.Pass(day.Add(6 * time.Hour))
	h.Pass(day.Add(12 * time.Hour))
	h.Pass(day.Add(10*24*time.Hour + 6*time.Hour))
	historytest.AssertGainsEqualBruteForce(t, db, historytest.Schedule, 1)
	if got := sinktest.Lines(t, db.Conn, "SELECT toString(sum(new_messages)) FROM "+db.Table("project_read_gains")+" WHERE snapshot_at > toDateTime('2026-03-05 00:00:00')"); len(got) != 1 || got[0] != "0" {
		t.Errorf("new messages after the absence: %v, want none", got)
	}
}

// One batch holding two snapshots of a project, one before the project's
// latest and one after it (a backfill over several times): the snapshot in
// between is refreshed too, its previous snapshot being the backfilled one.
func TestGainsOfABatchAroundAnExistingSnapshot(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	h := historytest.NewHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.Pass(day.Add(8 * time.Hour))
	h.Pass(day.Add(12 * time.Hour))
	var b sink.Batch
	for _, at := range []time.Duration{10 * time.Hour, 15 * time.Hour} {
		f := h.Fetch(1, day.Add(at), h.NextVersion())
		b.Projects = append(b.Projects, f.Projects...)
		b.Messages = append(b.Messages, f.Messages...)
		b.Snapshots = append(b.Snapshots, f.Snapshots...)
	}
	h.Write(&b)
	historytest.AssertGainsEqualBruteForce(t, db, historytest.Schedule, 1)
}

// TestUpgradeFrom0_3 upgrades a database at release 0.3.0's schema
// (migrations 1 to 6, without what 7 adds) holding that release's history
// and the gains it computed, by three migrators at once. The history's
// gains are computed again with the schedules 0.3.0 counted its missed
// ticks by, so an interval that spanned a missed tick still says so, and
// every view equals its brute force.
func TestUpgradeFrom0_3(t *testing.T) {
	db := sinktest.New(t)
	ctx := context.Background()
	open := func() *clickhouse.ClickHouse { return historytest.OpenSink(t, db.DSN) }
	historytest.MigrateFirst(t, db.DSN, 6)
	for _, q := range []string{
		"ALTER TABLE %[1]s DROP COLUMN schedule",
		"ALTER TABLE %[2]s DROP COLUMN gain_snap_messages", "ALTER TABLE %[2]s DROP COLUMN gain_snap_reads", "ALTER TABLE %[2]s DROP COLUMN gain_snap_total",
	} {
		table := db.Table("message_read_snapshots")
		if strings.Contains(q, "gain_snap") {
			table = db.Table("project_read_gain_rollup")
		}
		if err := db.Conn.Exec(ctx, strings.NewReplacer("%[1]s", table, "%[2]s", table).Replace(q)); err != nil {
			t.Fatal(err)
		}
	}
	// Its history: passes every 8 hours, the tick at 16:00 of the second
	// day missed, and for each snapshot a gains row as 0.3.0 wrote it,
	// with the schedule and a key of its form (first digit 0).
	old := historytest.NewHistory(t, nil)
	day := time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC)
	for i := range 7 {
		at := day.Add(time.Duration(8*i) * time.Hour)
		status := "ok"
		if i == 5 {
			status = "missed"
		}
		run := fmt.Sprintf("INSERT INTO %s (run_id, schedule, trigger, snapshot_at, started_at, finished_at, status) SELECT 'r%d', '%s', 'cron', toDateTime(%d), toDateTime(%d), toDateTime(%d), '%s'",
			db.Table("sync_runs"), i, historytest.Schedule, at.Unix(), at.Unix(), at.Unix(), status)
		if err := db.Conn.Exec(ctx, run); err != nil {
			t.Fatal(err)
		}
		if status == "missed" {
			continue
		}
		for p := int64(1); p <= historytest.Projects; p++ {
			historytest.InsertDirect(t, db, old.Fetch(p, at, old.NextVersion()))
			gain := fmt.Sprintf("INSERT INTO %s (project_id, snapshot_at, gain_key, gain_schedule) SELECT %d, toDateTime(%d), '0%d', '%s'",
				db.Table("project_read_gain_rollup"), p, at.Unix(), i, historytest.Schedule)
			if err := db.Conn.Exec(ctx, gain); err != nil {
				t.Fatal(err)
			}
		}
	}
	errs := make(chan error, 3)
	for range 3 {
		ch := open()
		go func() { errs <- ch.Migrate(ctx) }()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	ch := open()
	historytest.AssertVerified(t, ch, time.Time{})
	historytest.AssertGainsEqualBruteForce(t, db, historytest.Schedule, 2)
	if got := sinktest.Lines(t, db.Conn, "SELECT toString(sum(missed_ticks)) FROM "+db.Table("project_read_gains")); len(got) != 1 || got[0] != fmt.Sprint(historytest.Projects) {
		t.Errorf("missed ticks of 0.3.0's history after the upgrade: %v, want the one missed tick in every project's interval", got)
	}
	// The next pass goes on from there.
	h := historytest.NewHistory(t, ch)
	h.Version, h.Reads = old.Version, old.Reads
	h.Pass(day.Add(56 * time.Hour))
	historytest.AssertVerified(t, ch, time.Time{})
}
