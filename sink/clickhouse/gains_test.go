package clickhouse_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
)

// bruteGains computes the rows of project_read_gains and
// project_read_daily_gains from the whole snapshot table, in Go, the
// simplest way: each message's newest write at each snapshot, minus its
// newest write at its previous snapshot (0 for a new message), summed per
// project and snapshot; the interval's missed ticks are the ticks of
// schedule that sync_runs records strictly between the latest previous
// snapshot of the snapshot's messages and the snapshot. With schedule
// empty, no tick counts.
func bruteGains(t *testing.T, db *sinktest.DB, schedule string) (snapshots, days []string) {
	t.Helper()
	type key struct{ p, m int64 }
	type row struct {
		at      uint32
		version uint64
		reads   uint64
	}
	newest := map[key]map[uint32]row{}
	for _, line := range sinktest.Lines(t, db.Conn, "SELECT concat(toString(project_id), ' ', toString(message_id), ' ', toString(toUInt32(snapshot_at)), ' ', toString(version), ' ', toString(read_count)) FROM "+db.Table("message_read_snapshots")) {
		var (
			k key
			r row
		)
		if _, err := fmt.Sscan(line, &k.p, &k.m, &r.at, &r.version, &r.reads); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if newest[k] == nil {
			newest[k] = map[uint32]row{}
		}
		if old, ok := newest[k][r.at]; !ok || r.version > old.version {
			newest[k][r.at] = r
		}
	}
	var ticks []uint32
	if schedule != "" {
		for _, line := range sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT DISTINCT toString(toUInt32(snapshot_at)) FROM %s WHERE trigger = 'cron' AND schedule = '%s'", db.Table("sync_runs"), schedule)) {
			var at uint32
			fmt.Sscan(line, &at)
			ticks = append(ticks, at)
		}
	}
	type snap struct {
		p  int64
		at uint32
	}
	type sum struct {
		messages, newMessages, reads uint64
		prevAt                       uint32
	}
	sums := map[snap]*sum{}
	for k, rows := range newest {
		var prev *row
		for _, at := range slices.Sorted(maps.Keys(rows)) {
			r := rows[at]
			s := sums[snap{k.p, at}]
			if s == nil {
				s = &sum{}
				sums[snap{k.p, at}] = s
			}
			s.messages++
			s.reads += r.reads
			if prev == nil {
				s.newMessages++
			} else {
				s.reads -= prev.reads
				s.prevAt = max(s.prevAt, prev.at)
			}
			prev = &r
		}
	}
	type day struct {
		p int64
		d string
	}
	daySums := map[day]*struct{ snapshots, newMessages, reads, missed uint64 }{}
	keys := slices.SortedFunc(maps.Keys(sums), func(a, b snap) int { return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.at, b.at)) })
	for _, k := range keys {
		s := sums[k]
		var missed uint64
		if s.prevAt > 0 {
			for _, tick := range ticks {
				if tick > s.prevAt && tick < k.at {
					missed++
				}
			}
		}
		snapshots = append(snapshots, fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%d\t%d", k.p, k.at, s.prevAt, s.messages, s.newMessages, int64(s.reads), missed))
		d := day{k.p, time.Unix(int64(k.at), 0).UTC().Format(time.DateOnly)}
		ds := daySums[d]
		if ds == nil {
			ds = &struct{ snapshots, newMessages, reads, missed uint64 }{}
			daySums[d] = ds
		}
		ds.snapshots++
		ds.newMessages += s.newMessages
		ds.reads += s.reads
		ds.missed += missed
	}
	for _, d := range slices.SortedFunc(maps.Keys(daySums), func(a, b day) int { return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.d, b.d)) }) {
		ds := daySums[d]
		days = append(days, fmt.Sprintf("%d\t%s\t%d\t%d\t%d\t%d", d.p, d.d, ds.snapshots, ds.newMessages, int64(ds.reads), ds.missed))
	}
	return snapshots, days
}

// gainsViewRows returns the rows of the two gains views in bruteGains'
// form, filtered by where.
func gainsViewRows(t *testing.T, db *sinktest.DB, where string, pushDown bool) (snapshots, days []string) {
	t.Helper()
	settings := ""
	if pushDown {
		settings = " SETTINGS enable_optimize_predicate_expression = 1"
	}
	snapshots = sinktest.Lines(t, db.Conn, fmt.Sprintf(`SELECT arrayStringConcat([toString(project_id), toString(toUInt32(snapshot_at)),
    toString(ifNull(toUInt32(prev_snapshot_at), 0)), toString(messages), toString(new_messages), toString(reads_gained), toString(missed_ticks)], '\t')
FROM %s %s ORDER BY project_id, snapshot_at%s`, db.Table("project_read_gains"), where, settings))
	days = sinktest.Lines(t, db.Conn, fmt.Sprintf(`SELECT arrayStringConcat([toString(project_id), toString(day), toString(snapshots),
    toString(new_messages), toString(reads_gained), toString(missed_ticks)], '\t')
FROM %s %s ORDER BY project_id, day%s`, db.Table("project_read_daily_gains"), where, settings))
	return snapshots, days
}

// assertGainsEqualBruteForce compares both gains views with bruteGains,
// whole and filtered to one project, with and without the filter pushed
// down.
func assertGainsEqualBruteForce(t *testing.T, db *sinktest.DB, schedule string, project int64) {
	t.Helper()
	wantSnaps, wantDays := bruteGains(t, db, schedule)
	if len(wantSnaps) == 0 {
		t.Fatal("the brute force has no rows: the fixture is wrong")
	}
	for _, f := range []struct {
		where    string
		pushDown bool
	}{
		{"", false},
		{fmt.Sprintf("WHERE project_id = %d", project), true},
		{fmt.Sprintf("WHERE project_id = %d", project), false},
	} {
		gotSnaps, gotDays := gainsViewRows(t, db, f.where, f.pushDown)
		ws, wd := wantSnaps, wantDays
		if f.where != "" {
			ws, wd = ofProject(ws, project), ofProject(wd, project)
		}
		if strings.Join(gotSnaps, "\n") != strings.Join(ws, "\n") {
			t.Errorf("project_read_gains %s (push down %v) differs from the brute force:\n%s", f.where, f.pushDown, diffLines(gotSnaps, ws))
		}
		if strings.Join(gotDays, "\n") != strings.Join(wd, "\n") {
			t.Errorf("project_read_daily_gains %s (push down %v) differs from the brute force:\n%s", f.where, f.pushDown, diffLines(gotDays, wd))
		}
	}
}

// ofProject keeps the lines of project p.
func ofProject(lines []string, p int64) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, fmt.Sprintf("%d\t", p)) {
			out = append(out, l)
		}
	}
	return out
}

// TestGainsEqualBruteForce writes the generated history (a tick run twice,
// a retried list, a spool replay delivered twice, a backfill in the past,
// a message that appears mid-history, one that stops being listed, one
// listed again after two days, one left out of a single list, a missed
// tick) and compares the gains
// views with the brute force, before and after every table is merged.
func TestGainsEqualBruteForce(t *testing.T) {
	ch, db := openTestSink(t)
	newHistory(t, ch).generate(true)
	assertGainsEqualBruteForce(t, db, historySchedule, 2)

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
	assertGainsEqualBruteForce(t, db, historySchedule, 2)
}

// TestGainsFoldedAtUpgradeFrom0_2 upgrades a database at 0.2.0's schema
// (migrations 1 and 2) holding that release's history:
// the history's gains are computed at migration, and the gains of the
// passes written after extend them exactly.
func TestGainsFoldedAtUpgradeFrom0_2(t *testing.T) {
	db := sinktest.New(t)
	ctx := context.Background()
	var logs bytes.Buffer
	ch := openSink(t, db.DSN, clickhouse.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err := clickhouse.MigrateFirst(ctx, ch, 2); err != nil {
		t.Fatal(err)
	}
	old := newHistory(t, nil)
	for i := 0; i < 9; i++ {
		at := time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 8 * time.Hour)
		if i == 4 {
			old.deleted[[2]int64{2, 2}] = true
		}
		for p := int64(1); p <= historyProjects; p++ {
			insertDirect(t, db, old.fetch(p, at, old.nextVersion()))
		}
	}
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "computed reads gained") {
		t.Errorf("the log does not report the fold of reads gained:\n%s", logs.String())
	}
	assertGainsEqualBruteForce(t, db, historySchedule, 2)

	h := newHistory(t, ch)
	h.version, h.reads, h.deleted = old.version, old.reads, old.deleted
	h.pass(time.Date(2026, 4, 2, 8, 0, 0, 0, time.UTC))
	h.recordTick(time.Date(2026, 4, 2, 12, 0, 0, 0, time.UTC), "skipped")
	h.pass(time.Date(2026, 4, 2, 16, 0, 0, 0, time.UTC))
	assertGainsEqualBruteForce(t, db, historySchedule, 2)
	if got := sinktest.Lines(t, db.Conn, "SELECT toString(sum(missed_ticks)) FROM "+db.Table("project_read_gains")); len(got) != 1 || got[0] != fmt.Sprint(historyProjects) {
		t.Errorf("missed ticks after one skipped tick: %v, want one per project", got)
	}
}

// TestGainRefreshesLandInAnyOrder lands the refreshes of a snapshot that
// saw fewer rows after those that saw more, as racing writers would: the
// views keep the values of the refreshes that saw more.
func TestGainRefreshesLandInAnyOrder(t *testing.T) {
	ch, db := openTestSink(t)
	ctx := context.Background()
	h := newHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.pass(day.Add(8 * time.Hour))
	h.pass(day.Add(12 * time.Hour))
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
	h.pass(day.Add(12 * time.Hour))
	for p := int64(1); p <= historyProjects; p++ {
		b := h.fetch(p, day.Add(10*time.Hour), h.nextVersion())
		h.write(&b)
	}
	h.deleted[[2]int64{1, 1}] = true
	h.pass(day.Add(16 * time.Hour))
	for _, r := range rollups {
		if err := db.Conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT * FROM %s", db.Table(r), db.Table("stale_"+r))); err != nil {
			t.Fatal(err)
		}
	}
	assertGainsEqualBruteForce(t, db, historySchedule, 1)
}

// A project fetched again after more than a week is not new: its messages'
// previous rows are found however far back they are.
func TestGainsAfterALongAbsence(t *testing.T) {
	ch, db := openTestSink(t)
	h := newHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.pass(day.Add(6 * time.Hour))
	h.pass(day.Add(12 * time.Hour))
	h.pass(day.Add(10*24*time.Hour + 6*time.Hour))
	assertGainsEqualBruteForce(t, db, historySchedule, 1)
	if got := sinktest.Lines(t, db.Conn, "SELECT toString(sum(new_messages)) FROM "+db.Table("project_read_gains")+" WHERE snapshot_at > toDateTime('2026-03-05 00:00:00')"); len(got) != 1 || got[0] != "0" {
		t.Errorf("new messages after the absence: %v, want none", got)
	}
}

// One batch holding two snapshots of a project, one before the project's
// latest and one after it (a backfill over several times): the snapshot in
// between is refreshed too, its previous snapshot being the backfilled one.
func TestGainsOfABatchAroundAnExistingSnapshot(t *testing.T) {
	ch, db := openTestSink(t)
	h := newHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.pass(day.Add(8 * time.Hour))
	h.pass(day.Add(12 * time.Hour))
	var b sink.Batch
	for _, at := range []time.Duration{10 * time.Hour, 15 * time.Hour} {
		f := h.fetch(1, day.Add(at), h.nextVersion())
		b.Projects = append(b.Projects, f.Projects...)
		b.Messages = append(b.Messages, f.Messages...)
		b.Snapshots = append(b.Snapshots, f.Snapshots...)
	}
	h.write(&b)
	assertGainsEqualBruteForce(t, db, historySchedule, 1)
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
	open := func() *clickhouse.ClickHouse { return openSink(t, db.DSN) }
	if err := clickhouse.MigrateFirst(ctx, open(), 6); err != nil {
		t.Fatal(err)
	}
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
	old := newHistory(t, nil)
	day := time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC)
	for i := range 7 {
		at := day.Add(time.Duration(8*i) * time.Hour)
		status := "ok"
		if i == 5 {
			status = "missed"
		}
		run := fmt.Sprintf("INSERT INTO %s (run_id, schedule, trigger, snapshot_at, started_at, finished_at, status) SELECT 'r%d', '%s', 'cron', toDateTime(%d), toDateTime(%d), toDateTime(%d), '%s'",
			db.Table("sync_runs"), i, historySchedule, at.Unix(), at.Unix(), at.Unix(), status)
		if err := db.Conn.Exec(ctx, run); err != nil {
			t.Fatal(err)
		}
		if status == "missed" {
			continue
		}
		for p := int64(1); p <= historyProjects; p++ {
			insertDirect(t, db, old.fetch(p, at, old.nextVersion()))
			gain := fmt.Sprintf("INSERT INTO %s (project_id, snapshot_at, gain_key, gain_schedule) SELECT %d, toDateTime(%d), '0%d', '%s'",
				db.Table("project_read_gain_rollup"), p, at.Unix(), i, historySchedule)
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
	assertVerified(t, ch, time.Time{})
	assertGainsEqualBruteForce(t, db, historySchedule, 2)
	if got := sinktest.Lines(t, db.Conn, "SELECT toString(sum(missed_ticks)) FROM "+db.Table("project_read_gains")); len(got) != 1 || got[0] != fmt.Sprint(historyProjects) {
		t.Errorf("missed ticks of 0.3.0's history after the upgrade: %v, want the one missed tick in every project's interval", got)
	}
	// The next pass goes on from there.
	h := newHistory(t, ch)
	h.version, h.reads = old.version, old.reads
	h.pass(day.Add(56 * time.Hour))
	assertVerified(t, ch, time.Time{})
}
