package verify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
	"github.com/readsync/readsync/sink/verify"
)

// Verify's brute force agrees with the views over the generated history,
// whole and from a day in its middle, and each has rows in every view:
// a check that compared nothing would pass too.
func TestVerifyFindsTheViewsRight(t *testing.T) {
	ch, _ := historytest.OpenTestSink(t)
	historytest.NewHistory(t, ch).Generate(true)
	for _, since := range []time.Time{{}, time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC)} {
		rep := historytest.AssertVerified(t, ch, since)
		// Every view users query, and name_health.
		if len(rep.Views) != len(schema.Views())+1 {
			t.Fatalf("%d views verified, want %d", len(rep.Views), len(schema.Views())+1)
		}
		for _, v := range rep.Views {
			// The generated history records no name's health; from a day
			// on, a project's usual curve is judged only where all of its
			// messages were created from that day on, which none was.
			if v.Rows == 0 && v.View != schema.NameHealthView && (since.IsZero() || v.View != schema.ProjectByAgeView) {
				t.Errorf("since %s: %s has no rows to compare", since, v.View)
			}
		}
	}
}

// Each kind of difference, written by hand into a rollup, is found in the
// view it shows in, with its key, and Repair mends it.
func TestVerifyFindsAndRepairsEachDifference(t *testing.T) {
	ch, db, h := sixPasses(t)
	ctx := context.Background()
	exec := func(q string) {
		t.Helper()
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	// A missing row: project 1's day in the day rollup.
	db.DeleteRows(t, "project_read_day_rollup", "project_id = 1")
	// A wrong value: project 2's gains at 08:00, with a key that outranks
	// every refresh.
	exec(fmt.Sprintf(`INSERT INTO %s (project_id, snapshot_at, gain_key, gain_prev_at, gain_messages, gain_new_messages, gain_reads,
    gain_missed_ticks, gain_schedule, gain_snap_messages, gain_snap_reads, gain_snap_total)
SELECT 2, toDateTime('2026-03-01 08:00:00', 'UTC'), '9', toDateTime('2026-03-01 04:00:00', 'UTC'), 5, 0, 12345, 0, '', 5, 1, 2`, db.Table("project_read_gain_rollup")))
	// An extra row: a message nobody wrote, in the latest rollup.
	exec(fmt.Sprintf("INSERT INTO %s (project_id, message_id, latest_row) SELECT toInt64(3), toInt64(999), latest_row FROM %s WHERE project_id = 3 AND message_id = 301",
		db.Table("message_read_latest_rollup"), db.Table("message_read_latest_rollup")))

	// A wrong curve: message 101's last snapshot of the day (its age
	// bucket 20) written into its bucket of 2 hours.
	exec(fmt.Sprintf(`INSERT INTO %s (project_id, message_id, age_hours, age_at, age_row, age_first)
SELECT project_id, message_id, toUInt32(2), toDateTime(toUInt32(age_at) - 18 * 3600), age_row, age_first FROM %s
WHERE project_id = 1 AND message_id = 101 AND age_hours = 20`, db.Table("message_read_age_rollup"), db.Table("message_read_age_rollup")))

	rep, err := ch.Verify(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, v := range rep.Views {
		found[v.View] = historytest.DescribeDiff(v)
	}
	for view, want := range map[string]string{
		"project_read_daily":     "missing project_id=1 day=2026-03-01",
		"project_read_gains":     "wrong   project_id=2 snapshot_at=2026-03-01T08:00:00Z",
		"project_read_snapshots": "wrong   project_id=2 snapshot_at=2026-03-01T08:00:00Z",
		"message_read_latest":    "extra   project_id=3 message_id=999",
		"message_read_by_age":    "wrong   project_id=1 message_id=101 age_hours=2",
	} {
		if !strings.Contains(found[view], want) {
			t.Errorf("%s: the report lacks %q:\n%s", view, want, found[view])
		}
	}
	if rep.Clean() {
		t.Fatal("the report is clean")
	}
	before := mutations(t, db)
	if err := ch.Repair(ctx, rep); err != nil {
		t.Fatal(err)
	}
	historytest.AssertVerified(t, ch, time.Time{})
	// Where the server marks rows deleted, the repair's deletions are
	// marks: no part that holds them, other projects' rows included, is
	// written again whole.
	var marks bool
	if err := db.Conn.QueryRow(ctx, "SELECT count() > 0 FROM system.settings WHERE name = 'lightweight_deletes_sync'").Scan(&marks); err != nil {
		t.Fatal(err)
	}
	deletions := 0
	for id, command := range mutations(t, db) {
		if _, ok := before[id]; ok {
			continue
		}
		deletions++
		if marks && !strings.Contains(command, "UPDATE _row_exists = 0") {
			t.Errorf("on a server that marks deleted rows, the repair wrote parts again whole: %s", command)
		}
	}
	if deletions == 0 {
		t.Error("the repair deleted nothing")
	}
	// The next pass builds on what the repair left, not on a tip of the
	// rows it found wrong.
	h.Pass(sixPassesDay().Add(24 * time.Hour))
	historytest.AssertVerified(t, ch, time.Time{})
}

// Each view --verify judges that TestVerifyFindsAndRepairsEachDifference
// and TestVerifyFindsAndRepairsNameHealth leave undamaged is damaged on
// its own, in the rows under it (its rollup, or the view's definition
// where it reads the stored history itself): the report names the row
// that differs in that view, and Repair mends it.
func TestVerifyFindsAndRepairsEachViewDamaged(t *testing.T) {
	ch, db, _ := sixPasses(t)
	ctx := context.Background()
	// A refresh key that outranks every refresh's: those of this release
	// start with 1, and an hour's has refreshKeyLen (80) characters.
	const outranks = "'9'"
	hourKey := "'" + strings.Repeat("9", 80) + "'"
	// copyAgeRow writes message's row of its age bucket from into its
	// bucket to, as if the message had been seen at that age: a curve
	// the snapshots do not have.
	copyAgeRow := func(project, message, from, to int) string {
		return fmt.Sprintf(`INSERT INTO %[1]s (project_id, message_id, age_hours, age_at, age_row, age_first)
SELECT project_id, message_id, toUInt32(%[4]d), toDateTime(toUInt32(age_at) - age_hours * 3600 + %[4]d * 3600), age_row, age_first FROM %[1]s
WHERE project_id = %[2]d AND message_id = %[5]d AND age_hours = %[3]d`, db.Table(schema.AgeRollup), project, from, to, project*100+message)
	}
	for _, c := range []struct {
		view string
		// damage returns the statements that damage the view.
		damage func(t *testing.T) []string
		want   string
	}{
		{schema.DailyGainsView, func(*testing.T) []string {
			// Project 2's day with reads gained nobody read.
			return []string{fmt.Sprintf(`INSERT INTO %s (project_id, day, day_gain_state)
SELECT toInt64(2), toDate('2026-03-01'), argMaxState((toUInt64(6), toUInt64(0), toInt64(12345), toUInt64(0)), %s)`,
				db.Table(schema.DayGainsRollup), outranks)}
		}, "wrong   project_id=2 day=2026-03-01"},
		{schema.CoverageView, func(t *testing.T) []string {
			// The view itself altered: a tick counted ok when it failed.
			stmts := schema.RewriteView(chconn.NewNames(db.Name, chconn.Topology{}), schema.CoverageView)
			last := len(stmts) - 1
			altered := strings.Replace(stmts[last], "min(status = 'ok') AS tick_ok", "min(status = 'failed') AS tick_ok", 1)
			if altered == stmts[last] {
				t.Fatalf("schedule_coverage counts no tick_ok as min(status = 'ok'):\n%s", stmts[last])
			}
			stmts[last] = altered
			return stmts
		}, `wrong   schedule="every-4h" day=2026-03-01`},
		{schema.HourlyView, func(*testing.T) []string {
			// Project 3's hour at 08:00 with reads its messages never had.
			return []string{fmt.Sprintf(`INSERT INTO %s (project_id, hour, hour_state)
SELECT toInt64(3), toDateTime('2026-03-01 08:00:00', 'UTC'), maxState(%s)`,
				db.Table(schema.HourRollup), schema.HourRow(hourKey, "toUInt64(5)", "toUInt64(12345)", "toUInt64(99999)"))}
		}, "wrong   project_id=3 hour=2026-03-01T08:00:00Z"},
		{schema.HourlyGainsView, func(*testing.T) []string {
			// Project 4's hour at 12:00 with reads gained nobody read.
			return []string{fmt.Sprintf(`INSERT INTO %s (project_id, hour, hour_gain_state)
SELECT toInt64(4), toDateTime('2026-03-01 12:00:00', 'UTC'), argMaxState((toUInt64(1), toUInt64(0), toInt64(12345), toUInt64(0)), %s)`,
				db.Table(schema.HourGainsRollup), outranks)}
		}, "wrong   project_id=4 hour=2026-03-01T12:00:00Z"},
		{schema.SpeedView, func(t *testing.T) []string {
			// Message 201's stored speed with reads it never had, in a
			// row that outranks its own: the view reads the speed
			// rollup, not the curve.
			// The rollup packs the latest reads into speed_values[7]
			// (schema's speed.go); the view reads them by name.
			return []string{fmt.Sprintf(`INSERT INTO %[1]s (%[2]s)
SELECT project_id, message_id, create_at, version + 1, speed_nulls, speed_share_24h,
    arrayMap((v, i) -> if(i = 7, v + 12345, v), speed_values, arrayEnumerate(speed_values))
FROM %[1]s FINAL WHERE project_id = 2 AND message_id = 201`, db.Table(schema.SpeedRollup), schema.SpeedTable.ColumnList())}
		}, "wrong   project_id=2 message_id=201"},
		{schema.ProjectByAgeView, func(*testing.T) []string {
			// Message 101 seen 30 hours old, as only message 102 was of
			// project 1's messages.
			return []string{copyAgeRow(1, 1, 20, 30)}
		}, "wrong   project_id=1 age_hours=30"},
	} {
		t.Run(c.view, func(t *testing.T) {
			for _, q := range c.damage(t) {
				if err := db.Conn.Exec(ctx, q); err != nil {
					t.Fatalf("%v\n%s", err, q)
				}
			}
			rep, err := ch.Verify(ctx, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			wantDiff(t, rep, c.view, c.want)
			if err := ch.Repair(ctx, rep); err != nil {
				t.Fatal(err)
			}
			historytest.AssertVerified(t, ch, time.Time{})
		})
	}
}

// mutations returns the mutations of db's tables the server records, by
// table and id, with their commands.
func mutations(t *testing.T, db *sinktest.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	rows, err := db.Conn.Query(context.Background(), "SELECT concat(table, '/', mutation_id), command FROM system.mutations WHERE database = "+chconn.QuoteString(db.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, command string
		if err := rows.Scan(&id, &command); err != nil {
			t.Fatal(err)
		}
		out[id] = command
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A project snapshot written again by another schedule (a backfill with
// --snapshot-at over a pass) counts the missed ticks of its newest
// write's schedule: the brute force takes a snapshot's schedule from the
// row of the highest version among its messages, as the views do, both
// over the whole history and from a window.
func TestVerifyTakesASnapshotsScheduleFromItsNewestWrite(t *testing.T) {
	ch, _ := historytest.OpenTestSink(t)
	h := historytest.NewHistory(t, ch)
	day := time.Now().UTC().AddDate(0, 0, -3).Truncate(24 * time.Hour)
	at := func(hour int) time.Time { return day.Add(time.Duration(hour) * time.Hour) }
	h.Pass(at(4))
	h.RecordTick(at(8), "missed")
	h.Pass(at(12))
	// Project 3 at 12:00 again, newer, by a schedule with no ticks: its
	// gains at 12:00 count no missed tick, where the pass's counted 08:00.
	b := h.Fetch(3, at(12), h.NextVersion())
	b.Schedule = "backfill-by-hand"
	h.Write(&b)
	historytest.AssertVerified(t, ch, time.Time{})
	historytest.AssertVerified(t, ch, at(10))
}

// With a time, Verify compares, besides the snapshots and days from its
// day on, what the change logs record as written since then, whatever its
// time, and the rows that depend on it: a snapshot taken ten days ago and
// written now makes its project's later gains part of the window, and so
// does a tick of ten days ago recorded now, for the projects of its
// schedule. What was written before the window is not compared.
func TestVerifySinceFollowsTheChangeLogs(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	h := historytest.NewHistory(t, ch)
	day := time.Now().UTC().AddDate(0, 0, -10).Truncate(24 * time.Hour)
	at := func(hour int) time.Time { return day.Add(time.Duration(hour) * time.Hour) }
	for _, hour := range []int{4, 12, 20} {
		h.Pass(at(hour))
	}
	// The history as if written long ago: its change logs' rows gone, as
	// when their month's partition is dropped.
	for _, table := range []string{"snapshot_changes", "tick_changes"} {
		if err := db.Conn.Exec(ctx, "TRUNCATE TABLE "+db.Table(table)); err != nil {
			t.Fatal(err)
		}
	}
	since := time.Now().Add(-48 * time.Hour)
	rep := historytest.AssertVerified(t, ch, since)
	for _, v := range rep.Views {
		if v.Rows != 0 {
			t.Errorf("%s: %d rows compared in a window where nothing was taken or written", v.View, v.Rows)
		}
	}

	// Project 2 fetched at 08:00 and written now, as by a backfill with
	// --snapshot-at; the gains at 12:00, which now count from it, lost,
	// and with them the record of the write's refresh: as when the
	// process died before its refresh was done.
	b := h.Fetch(2, at(8), h.NextVersion())
	h.Write(&b)
	db.DeleteRows(t, "project_read_gain_rollup", fmt.Sprintf("project_id = 2 AND snapshot_at = toDateTime(%d)", at(12).Unix()))
	db.DeleteRows(t, "refreshes", "project_id = 2")
	rep, err := ch.Verify(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 1 || rep.Ticks != 0 || rep.Earlier != 1 || !rep.EarlierFrom.Equal(day) {
		t.Errorf("the window holds %d snapshots and %d ticks written since, %d projects from %s; want 1, 0, 1 from %s",
			rep.Written, rep.Ticks, rep.Earlier, rep.EarlierFrom, day)
	}
	wantDiff(t, rep, "project_read_gains", fmt.Sprintf("missing project_id=2 snapshot_at=%s", at(12).Format(time.RFC3339)))
	if _, err := ch.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	historytest.AssertVerified(t, ch, since)

	// The tick of 16:00, missed, recorded now (as a daemon records the
	// ticks it missed when it starts): every project's gains at 20:00
	// count it, and the day's coverage does.
	h.RecordTick(at(16), "missed")
	if rep, err = ch.Verify(ctx, since); err != nil {
		t.Fatal(err)
	}
	if rep.Ticks != 1 || rep.Earlier != historytest.Projects {
		t.Errorf("the window holds %d ticks written since, and %d projects from before it; want 1 and %d", rep.Ticks, rep.Earlier, historytest.Projects)
	}
	for p := 1; p <= historytest.Projects; p++ {
		wantDiff(t, rep, "project_read_gains", fmt.Sprintf("wrong   project_id=%d snapshot_at=%s", p, at(20).Format(time.RFC3339)))
	}
	for _, v := range rep.Views {
		if v.View == "schedule_coverage" && v.Rows != 1 {
			t.Errorf("schedule_coverage: %d rows compared, want the late tick's day", v.Rows)
		}
	}
	if _, err := ch.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	historytest.AssertVerified(t, ch, since)
}

// wantDiff fails t unless rep says that view differs in a row described
// as want (as historytest.DescribeDiff writes it).
func wantDiff(t *testing.T, rep verify.Report, view, want string) {
	t.Helper()
	for _, v := range rep.Views {
		if v.View == view {
			if got := historytest.DescribeDiff(v); !strings.Contains(got, want) {
				t.Errorf("%s: the report lacks %q:\n%s", view, want, got)
			}
			return
		}
	}
	t.Errorf("no view %s in the report", view)
}

// name_health is held to the names' failures themselves: a failure
// written into its hourly rollup by hand shows as a wrong row, one of a
// name no pass failed as an extra row, a name whose hours were deleted as a missing one,
// and Repair computes the hours again from name_failures.
func TestVerifyFindsAndRepairsNameHealth(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute)
	for i, at := range []time.Time{now.Add(-3 * time.Hour), now.Add(-2 * time.Hour), now.Add(-time.Hour)} {
		b := &sink.Batch{Schedule: "hourly", NameSuccesses: []sink.NameSuccess{{NFT: "good.eth", SnapshotAt: at}}}
		for _, n := range []string{"bad.eth", "worse.eth"} {
			b.NameFailures = append(b.NameFailures, sink.NameFailure{RunID: fmt.Sprint(i), SnapshotAt: at, NFT: n, Stage: "details",
				Kind: "timeout", Attempts: 3, Error: "deadline exceeded"})
		}
		if err := ch.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	rep := historytest.AssertVerified(t, ch, time.Time{})
	if v := rep.Views[len(rep.Views)-1]; v.View != schema.NameHealthView || v.Rows != 3 {
		t.Fatalf("the report's last view is %s with %d rows, want name_health with 3", v.View, v.Rows)
	}
	state := func(nft string, at time.Time, kind string) {
		t.Helper()
		q := fmt.Sprintf(`INSERT INTO %s (schedule, nft, hour, at_second, minute_bits, last_failure)
SELECT 'hourly', '%s', h, toUInt8(toUInt32(snapshot_at) %% 60), groupBitOrState(bitShiftLeft(toUInt64(1), intDiv(toUInt32(snapshot_at) %% 3600, 60))),
    maxState(%s)
FROM (SELECT toDateTime(%d) AS snapshot_at, toDateTime(intDiv(toUInt32(snapshot_at), 3600) * 3600) AS h, toUInt16(0) AS http_status,
    '%s' AS kind, 'by hand' AS error)
GROUP BY h, snapshot_at`, db.Table(schema.NameFailureHours), nft, schema.FailureRow, at.Unix(), kind)
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	state("worse.eth", now.Add(-30*time.Minute), "decode")
	state("ghost.eth", now.Add(-30*time.Minute), "decode")
	db.DeleteRows(t, schema.NameFailureHours, "nft = 'bad.eth'")

	rep, err := ch.Verify(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := historytest.DescribeDiff(rep.Views[len(rep.Views)-1])
	for _, want := range []string{`wrong   schedule="hourly" nft="worse.eth"`, `extra   schedule="hourly" nft="ghost.eth"`, `missing schedule="hourly" nft="bad.eth"`} {
		if !strings.Contains(got, want) {
			t.Errorf("name_health: the report lacks %q:\n%s", want, got)
		}
	}
	if err := ch.Repair(ctx, rep); err != nil {
		t.Fatal(err)
	}
	historytest.AssertVerified(t, ch, time.Time{})
}

// sixPassesDay is the day of sixPasses' passes.
func sixPassesDay() time.Time { return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC) }

// sixPasses opens a test sink holding six passes four hours apart from
// sixPassesDay, which --verify finds right: the history the tests damage,
// with the fake history that wrote it.
func sixPasses(t *testing.T) (*clickhouse.ClickHouse, *sinktest.DB, *historytest.History) {
	t.Helper()
	ch, db := historytest.OpenTestSink(t)
	h := historytest.NewHistory(t, ch)
	for i := range 6 {
		h.Pass(sixPassesDay().Add(time.Duration(4*i) * time.Hour))
	}
	historytest.AssertVerified(t, ch, time.Time{})
	return ch, db, h
}

// A check reads the tables the views join (the projects' names, the
// messages' subjects, the speeds) a step at a time. 18.16 narrows no
// joined subquery by a range over a view: a step that read each view as
// stored read those tables whole, and a check of S steps read them S
// times over. There each view is read as stored by the first step alone,
// and by the others through its query narrowed to their projects; the
// current release narrows the stored views itself. The projects table
// holds 60 000 projects without snapshots besides the history's four,
// each of which is a step of its own; the others' ids fall in the first
// step's range. A view altered by hand is still found, in the first step.
func TestVerifyReadsWhatTheViewsJoinAStepAtATime(t *testing.T) {
	db := sinktest.New(t)
	costs := sinktest.NewCosts()
	ch := historytest.OpenSink(t, db.DSN, clickhouse.WithIntercept(costs.Wrap), clickhouse.WithVerifyStepRows(1))
	ctx := context.Background()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	h := historytest.NewHistory(t, ch)
	for i := range 6 {
		h.Pass(sixPassesDay().Add(time.Duration(4*i) * time.Hour))
	}
	const others = 60_000
	if err := db.Conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, nft, name, version) SELECT -toInt64(number) - 1000, concat('other', toString(number)), 'other', 1 FROM system.numbers LIMIT %d",
		db.Table(schema.ProjectsTable.Name()), others)); err != nil {
		t.Fatal(err)
	}
	costs.Take()
	historytest.AssertVerified(t, ch, time.Time{})
	stmts := costs.Take()
	costs.Read(t, db.Conn, stmts)
	// A step reads its projects' names (stepNames) once, then each view.
	var steps, whole int
	for _, s := range stmts {
		if strings.HasPrefix(s.Text, "SELECT id, argMax(nft, version)") {
			steps++
		}
		if s.Rows >= others {
			whole++
		}
	}
	// The first step's names and its reads of the seven views keyed by
	// project and the three on the message's clock.
	if limit := 1 + 10; steps < historytest.Projects || whole > limit {
		for _, s := range stmts {
			t.Logf("%8d %.160s", s.Rows, strings.Join(strings.Fields(s.Text), " "))
		}
		t.Errorf("a check in %d steps read %d statements of at least the %d other projects, want at most %d (one step's) in at least %d steps",
			steps, whole, others, limit, historytest.Projects)
	}

	rewrite := schema.RewriteView(chconn.NewNames(db.Name, chconn.Topology{}), schema.DailyView)
	last := len(rewrite) - 1
	altered := strings.Replace(rewrite[last], "tupleElement(day_values, 2) AS reads", "tupleElement(day_values, 2) + 1 AS reads", 1)
	if altered == rewrite[last] {
		t.Fatalf("%s reads no tupleElement(day_values, 2) AS reads:\n%s", schema.DailyView, rewrite[last])
	}
	rewrite[last] = altered
	for _, q := range rewrite {
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	rep, err := ch.Verify(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wantDiff(t, rep, schema.DailyView, "wrong   project_id=1 day=2026-03-01")
	if err := ch.Repair(ctx, rep); err != nil {
		t.Fatal(err)
	}
	historytest.AssertVerified(t, ch, time.Time{})
}
