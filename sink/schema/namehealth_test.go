package schema_test

import (
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
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
	"github.com/readsync/readsync/sink/spool"
)

// name_health after three passes of two pods that share the names, in
// which names fail, recover and fail again: each name's last success, its
// last failure with the cause, its failures of the day and the passes in
// a row it has failed, every failure row delivered twice counting once.
func TestNameHealthFollowsThePasses(t *testing.T) {
	t.Parallel()
	db := sinktest.New(t)
	pods := []*clickhouse.ClickHouse{historytest.OpenSink(t, db.DSN), historytest.OpenSink(t, db.DSN)}
	ctx := context.Background()
	if err := pods[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Three passes, an hour apart, ending a minute ago; a name's pod is
	// its shard. Each failure row is written twice, as a spool entry
	// replayed after a lost answer would be.
	now := time.Now().UTC().Truncate(time.Second)
	ticks := []time.Time{now.Add(-2*time.Hour - time.Minute), now.Add(-time.Hour - time.Minute), now.Add(-time.Minute)}
	outcomes := map[string]string{ // name: its outcome at each pass, o ok, x failed
		"steady.eth":    "ooo",
		"broken.eth":    "xxx",
		"recovered.eth": "xxo",
		"relapsed.eth":  "oxx",
		"flaky.eth":     "xox",
		"gone.eth":      "x--", // failed, then removed from the list
	}
	names := slices.Sorted(maps.Keys(outcomes))
	for i, at := range ticks {
		for p, pod := range pods {
			b := &sink.Batch{Schedule: "hourly"}
			for k, n := range names {
				if k%2 != p {
					continue
				}
				switch outcomes[n][i] {
				case 'o':
					b.NameSuccesses = append(b.NameSuccesses, sink.NameSuccess{NFT: n, SnapshotAt: at})
				case 'x':
					b.NameFailures = append(b.NameFailures, sink.NameFailure{RunID: fmt.Sprintf("run-%d-%d", i, p), SnapshotAt: at,
						Shard: fmt.Sprintf("%d/2", p), NFT: n, Stage: "details", Kind: "http_5xx", HTTPStatus: uint16(500 + i), Attempts: 5,
						Error: fmt.Sprintf("HTTP %d at pass %d", 500+i, i)})
				}
			}
			for range 2 {
				if err := pod.Write(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// A backfill's names count under the schedule ''.
	if err := pods[0].Write(ctx, &sink.Batch{NameFailures: []sink.NameFailure{{RunID: "b", SnapshotAt: now, NFT: "broken.eth", Stage: "list", Kind: "decode", Attempts: 1, Error: "bad body"}}}); err != nil {
		t.Fatal(err)
	}

	got := map[string]clickhouse.NameHealth{}
	for _, s := range []string{"hourly", ""} {
		if err := pods[1].FailingNames(ctx, &s, func(h clickhouse.NameHealth) error {
			got[h.Schedule+"/"+h.NFT] = h
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	epoch := time.Unix(0, 0).UTC()
	want := map[string]clickhouse.NameHealth{
		"hourly/broken.eth":   {LastSuccessAt: epoch, LastFailureAt: ticks[2], LastHTTPStatus: 502, Failures24h: 3, FailingPasses: 3},
		"hourly/relapsed.eth": {LastSuccessAt: ticks[0], LastFailureAt: ticks[2], LastHTTPStatus: 502, Failures24h: 2, FailingPasses: 2},
		"hourly/flaky.eth":    {LastSuccessAt: ticks[1], LastFailureAt: ticks[2], LastHTTPStatus: 502, Failures24h: 2, FailingPasses: 1},
		"hourly/gone.eth":     {LastSuccessAt: epoch, LastFailureAt: ticks[0], LastHTTPStatus: 500, Failures24h: 1, FailingPasses: 1},
		"/broken.eth":         {LastSuccessAt: epoch, LastFailureAt: now, Failures24h: 1, FailingPasses: 1},
	}
	if len(got) != len(want) {
		t.Errorf("failing names %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s is not failing", k)
			continue
		}
		if !g.LastSuccessAt.Equal(w.LastSuccessAt) || !g.LastFailureAt.Equal(w.LastFailureAt) || g.LastHTTPStatus != w.LastHTTPStatus ||
			g.Failures24h != w.Failures24h || g.FailingPasses != w.FailingPasses {
			t.Errorf("%s: %+v, want %+v", k, g, w)
		}
		if g.LastErrorKind == "" || g.LastError == "" {
			t.Errorf("%s: no cause: %+v", k, g)
		}
	}
	counts, err := pods[0].NamesFailing(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if c := counts["hourly"]; c.Failing != 4 || c.NotRead != 2 || c.MaxPasses != 3 {
		t.Errorf("the hourly schedule's failing names: %+v, want 4 failing, 2 for 2 passes or more, at most 3", c)
	}
	// The view, which reads the failures by the hour, equals its brute
	// force from the failures themselves, every name of both schedules.
	rep := historytest.AssertVerified(t, pods[1], time.Time{})
	if v := rep.Views[len(rep.Views)-1]; v.View != "name_health" || v.Rows != len(outcomes)+1 {
		t.Errorf("verify compared %d rows of %s, want name_health's %d", v.Rows, v.View, len(outcomes)+1)
	}
}

// The names' outcomes of a pass that met an outage wait in the spool with
// its rows and arrive when it is replayed; an entry delivered twice (its
// first INSERT's answer lost) counts once in name_health.
func TestNameOutcomesComeThroughTheSpool(t *testing.T) {
	t.Parallel()
	db := sinktest.New(t)
	ch := historytest.OpenSink(t, db.DSN)
	ctx := context.Background()
	sp, err := spool.Open(t.TempDir(), 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	now := time.Now().UTC().Truncate(time.Second)
	for i := range 2 {
		at := now.Add(time.Duration(i-2) * time.Minute)
		b := &sink.Batch{Schedule: "hourly",
			NameFailures:  []sink.NameFailure{{RunID: fmt.Sprint(i), SnapshotAt: at, NFT: "down.eth", Stage: "list", Kind: "timeout", Attempts: 5, Error: "no answer"}},
			NameSuccesses: []sink.NameSuccess{{NFT: "up.eth", SnapshotAt: at}}}
		// Spooled, then delivered twice: once by a replay whose answer
		// was lost, once by the replay after it.
		for range 2 {
			if err := sp.PutBatch(b); err != nil {
				t.Fatal(err)
			}
			if _, err := sp.Flush(ctx, ch); err != nil {
				t.Fatal(err)
			}
		}
	}
	var got []clickhouse.NameHealth
	if err := ch.FailingNames(ctx, nil, func(h clickhouse.NameHealth) error { got = append(got, h); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].NFT != "down.eth" || got[0].FailingPasses != 2 || got[0].Failures24h != 2 || got[0].LastErrorKind != "timeout" {
		t.Errorf("failing names after the replays: %+v, want down.eth, failing 2 passes in a row", got)
	}
	if n := sinktest.Lines(t, db.Conn, "SELECT toString(count()) FROM "+db.Table("name_successes")+" FINAL"); len(n) != 1 || n[0] != "1" {
		t.Errorf("name_successes holds %v rows once merged, want up.eth's latest", n)
	}
}

// A slow schedule's names count their failures in a row beyond the day
// the view reads: over its last 64 passes, from the passes sync_runs
// records. An @daily schedule's name failing ten days counts 10, one that
// succeeded four days ago 4, and a name of a schedule of a pass every
// twenty minutes beside it still counts over the hours of a day. --verify holds the view to
// its brute force.
func TestNameHealthCountsASlowScheduleBeyondADay(t *testing.T) {
	t.Parallel()
	db := sinktest.New(t)
	ch := historytest.OpenSink(t, db.DSN)
	ctx := context.Background()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	pass := func(schedule string, at time.Time, failing, succeeding []string) {
		t.Helper()
		b := &sink.Batch{Schedule: schedule}
		for _, n := range failing {
			b.NameFailures = append(b.NameFailures, sink.NameFailure{RunID: schedule + at.Format(time.RFC3339), SnapshotAt: at, NFT: n,
				Stage: "details", Kind: "not_found", HTTPStatus: 404, Attempts: 1, Error: "no project is bound to " + n})
		}
		for _, n := range succeeding {
			b.NameSuccesses = append(b.NameSuccesses, sink.NameSuccess{NFT: n, SnapshotAt: at})
		}
		if err := ch.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := ch.RecordRun(ctx, sink.Run{RunID: schedule + at.Format(time.RFC3339), Schedule: schedule, Trigger: "cron", SnapshotAt: at,
			StartedAt: at, FinishedAt: at, Status: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	// A schedule of a single pass, whose interval is unknown, counts over
	// the day.
	pass("once", now.Add(-2*time.Hour), []string{"once-broken.eth"}, nil)
	// Ten daily passes, the last a minute ago.
	for i := 9; i >= 0; i-- {
		at := now.Add(-time.Duration(i)*24*time.Hour - time.Minute)
		succeeding := []string{"steady.eth"}
		failing := []string{"broken.eth"}
		if i >= 4 {
			succeeding = append(succeeding, "relapsed.eth")
		} else {
			failing = append(failing, "relapsed.eth")
		}
		pass("daily", at, failing, succeeding)
	}
	// A pass every twenty minutes over the last 26 hours (64 of them span
	// less than a day), none within five minutes of the day's start: its
	// name fails at every one, and counts the day's failures, and the
	// passes in a row of the hours of the day (from the start of the hour
	// a day ago).
	var fast []time.Time
	for at := now.Add(-26*time.Hour + 5*time.Minute); at.Before(now); at = at.Add(20 * time.Minute) {
		pass("fast", at, []string{"fast-broken.eth"}, nil)
		fast = append(fast, at)
	}
	// The hour a day ago is the view's by the server's clock when it is
	// read: the names are read between two reads of that clock, again
	// when its hour changed between them, and the fast name's counts are
	// taken from the first.
	serverNow := func() time.Time {
		t.Helper()
		var at uint32
		if err := db.Conn.QueryRow(ctx, "SELECT toUInt32(now())").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return time.Unix(int64(at), 0).UTC()
	}
	var (
		got  map[string]clickhouse.NameHealth
		read time.Time
	)
	for attempt := 0; ; attempt++ {
		if attempt == 3 {
			t.Fatal("the server's hour changed during each of three reads of the failing names")
		}
		read = serverNow()
		got = map[string]clickhouse.NameHealth{}
		if err := ch.FailingNames(ctx, nil, func(h clickhouse.NameHealth) error {
			got[h.Schedule+"/"+h.NFT] = h
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if serverNow().Truncate(time.Hour).Equal(read.Truncate(time.Hour)) {
			break
		}
	}
	var fastDay, fastHours int
	for _, at := range fast {
		if !at.Before(read.Add(-24 * time.Hour)) {
			fastDay++
		}
		if !at.Before(read.Add(-24 * time.Hour).Truncate(time.Hour)) {
			fastHours++
		}
	}
	want := map[string][2]uint64{ // failures of the day, passes in a row
		"daily/broken.eth":     {1, 10},
		"daily/relapsed.eth":   {1, 4},
		"fast/fast-broken.eth": {uint64(fastDay), uint64(fastHours)},
		"once/once-broken.eth": {1, 1},
	}
	if len(got) != len(want) {
		t.Errorf("failing names %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for k, w := range want {
		if g := got[k]; g.Failures24h != w[0] || g.FailingPasses != w[1] {
			t.Errorf("%s: %d failures in the day, %d passes in a row; want %d and %d", k, g.Failures24h, g.FailingPasses, w[0], w[1])
		}
	}
	counts, err := ch.NamesFailing(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if c := counts["daily"]; c.Failing != 2 || c.NotRead != 2 || c.MaxPasses != 10 {
		t.Errorf("the daily schedule's failing names: %+v, want 2 failing, both for 3 passes or more, at most 10", c)
	}
	historytest.AssertVerified(t, ch, time.Time{})

	// The failures of five days ago lost from the rollup: --verify finds
	// broken.eth's passes wrong, and --repair computes them again, as far
	// back as the view reads.
	db.DeleteRows(t, schema.NameFailureHours, fmt.Sprintf("hour < toDateTime(%d) AND hour >= toDateTime(%d)",
		now.Add(-4*24*time.Hour-time.Hour).Unix(), now.Add(-6*24*time.Hour).Unix()))
	rep, err := ch.Verify(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := historytest.DescribeDiff(rep.Views[len(rep.Views)-1]); !strings.Contains(got, `wrong   schedule="daily" nft="broken.eth"`) {
		t.Errorf("name_health with a day of failures lost: the report lacks broken.eth:\n%s", got)
	}
	if err := ch.Repair(ctx, rep); err != nil {
		t.Fatal(err)
	}
	historytest.AssertVerified(t, ch, time.Time{})
}

// What the daemon and the dashboard read of name_health does not grow
// with the months of successes stored: with three months of every name's
// daily successes merged, the failing names' counts and their panel read
// at most 1.2 times what they read with a week, as the server counts them.
func TestNameHealthReadsNoMonthsOfSuccesses(t *testing.T) {
	t.Parallel()
	week := nameHealthReads(t, 7)
	months := nameHealthReads(t, 90)
	t.Logf("rows read with a week and with three months of successes stored:\n%s", sinktest.Report(week, months))
	for _, text := range sinktest.Grown(week, months, 1024) {
		t.Errorf("with 90 days of successes, %d rows read (over 1.2 times the %d with 7) by\n%s", months[text], week[text], text)
	}
}

// nameHealthReads stores days of daily successes of 5 000 names, merged,
// and the last two hours of failures of 1% of them a minute, and returns
// what the server read for the daemon's counts of the failing names and
// for the panel of the failing names and the status page's first of them,
// by statement.
func nameHealthReads(t *testing.T, days int) map[string]uint64 {
	t.Helper()
	const names, every = 5000, 100
	db := sinktest.New(t)
	costs := sinktest.NewCosts()
	ch := historytest.OpenSink(t, db.DSN, clickhouse.WithIntercept(costs.Wrap))
	ctx := context.Background()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Minute).Unix()
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s (nft, snapshot_at, schedule)
SELECT concat('name-', toString(number %% %d), '.eth'), toDateTime(%d - 7200 - 86400 * intDiv(number, %d)), 'every-minute'
FROM numbers(%d) WHERE (number %% %d) %% %d != 0`, db.Table("name_successes"), names, now, names, names*days, names, every),
		fmt.Sprintf(`INSERT INTO %s (run_id, snapshot_at, shard, nft, stage, kind, http_status, attempts, error, schedule)
SELECT 'run', toDateTime(%d - 60 * intDiv(number, %d)), '', concat('name-', toString((number %% %d) * %d), '.eth'), 'details', 'http_5xx', 502, 5, 'HTTP 502', 'every-minute'
FROM numbers(%d)`, db.Table("name_failures"), now, names/every, names/every, every, 120*names/every),
		fmt.Sprintf(`INSERT INTO %s (run_id, schedule, trigger, snapshot_at, started_at, finished_at, status)
SELECT concat('run-', toString(number)), 'every-minute', 'cron', toDateTime(%d - 60 * number), toDateTime(%d - 60 * number), toDateTime(%d - 60 * number), 'partial'
FROM numbers(120)`, db.Table("sync_runs"), now, now, now),
	} {
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	// What a server holds after the months: its merges keep each name's
	// latest success.
	for _, table := range []string{"name_successes", "name_failure_hour_rollup"} {
		if err := db.Conn.Exec(ctx, "OPTIMIZE TABLE "+db.Table(table)+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	costs.Take()
	counts, err := ch.NamesFailing(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts["every-minute"]; got.Failing != names/every || got.NotRead != names/every {
		t.Errorf("with %d days of successes: %+v failing, want %d failing, all of them past 3 passes", days, got, names/every)
	}
	n := 0
	schedule := "every-minute"
	if err := ch.FailingNames(ctx, &schedule, func(clickhouse.NameHealth) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != names/every {
		t.Errorf("with %d days of successes: %d failing names listed, want %d", days, n, names/every)
	}
	// The status page's first ones.
	top, err := ch.TopFailingNames(ctx, names/every/2)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != names/every/2 || top[0].FailingPasses < top[len(top)-1].FailingPasses {
		t.Errorf("with %d days of successes: the first %d failing names: %d, want %d, most passes in a row first", days, names/every/2, len(top), names/every/2)
	}
	stmts := costs.Take()
	costs.Read(t, db.Conn, stmts)
	return sinktest.ByText(stmts)
}
