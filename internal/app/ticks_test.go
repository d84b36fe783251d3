package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/sink/sinktest"
)

// coverage returns the schedule's sums over the days of schedule_coverage:
// ticks due, run, ok, skipped and missed.
func coverage(t *testing.T, f *fixture, schedule string) [5]uint64 {
	t.Helper()
	var c [5]uint64
	f.Query(t, "SELECT sum(ticks_due), sum(ticks_run), sum(ticks_ok), sum(ticks_skipped), sum(ticks_missed) FROM {db}.schedule_coverage WHERE schedule = '"+schedule+"'",
		&c[0], &c[1], &c[2], &c[3], &c[4])
	return c
}

// A daemon stopped for three ticks of its hourly schedule records those
// ticks as missed when it starts again, and schedule_coverage counts them.
func TestRestartRecordsMissedTicks(t *testing.T) {
	projects := apitest.Generate(2, 2, 31)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...)) // schedule "hourly", "0 * * * *"
	if code, _, stderr := f.run(t, "--migrate"); code != ExitOK {
		t.Fatalf("--migrate: exit %d\n%s", code, stderr)
	}
	// The last tick the stopped daemon ran: three ticks before the
	// latest one due.
	now := time.Now().UTC()
	last := now.Truncate(time.Hour).Add(-3 * time.Hour)
	if err := f.DB.Conn.Exec(context.Background(), fmt.Sprintf(
		"INSERT INTO %s (run_id, schedule, trigger, snapshot_at, started_at, finished_at, status, shard) SELECT 'r0', 'hourly', 'cron', toDateTime(%[2]d), toDateTime(%[2]d), toDateTime(%[2]d), 'ok', ''",
		f.DB.Table("sync_runs"), last.Unix())); err != nil {
		t.Fatal(err)
	}

	log, stop := f.startDaemon(t)
	apptest.Eventually(t, "three missed ticks recorded", func() bool {
		var n uint64
		f.Query(t, "SELECT count() FROM {db}.sync_runs WHERE status = 'missed'", &n)
		return n == 3
	}, log.String)
	// The rows are visible before the daemon has its answer: stopped
	// then, it would spool them, and its restart replay them, which 18.16
	// counts twice.
	apptest.WaitStarted(t, log.String)
	stop()
	var first, latest uint32
	f.Query(t, "SELECT toUInt32(min(snapshot_at)), toUInt32(max(snapshot_at)) FROM {db}.sync_runs WHERE status = 'missed'", &first, &latest)
	if int64(first) != last.Add(time.Hour).Unix() || int64(latest) != last.Add(3*time.Hour).Unix() {
		t.Errorf("missed ticks from %s to %s, want %s to %s", time.Unix(int64(first), 0).UTC(), time.Unix(int64(latest), 0).UTC(),
			last.Add(time.Hour), last.Add(3*time.Hour))
	}
	if got, want := coverage(t, f, "hourly"), [5]uint64{4, 1, 1, 0, 3}; got != want {
		t.Errorf("schedule_coverage due, run, ok, skipped, missed = %v, want %v", got, want)
	}
	// A second start finds nothing more missed.
	log, stop = f.startDaemon(t)
	apptest.WaitStarted(t, log.String)
	stop()
	var n uint64
	f.Query(t, "SELECT count() FROM {db}.sync_runs WHERE status = 'missed'", &n)
	if n != 3 {
		t.Errorf("%d missed ticks after a second start, want still 3", n)
	}
}

// A pass still running when its schedule's next tick comes makes that tick
// skipped, recorded as such, and counted by schedule_coverage.
func TestOverrunningPassRecordsSkippedTick(t *testing.T) {
	projects := apitest.Generate(2, 2, 32)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...),
		// Every pass waits for this name until its deadline, the next tick,
		// and then writes what it has: the next tick finds it running.
		apitest.WithFault(projects[1].NFT, apitest.Slow(time.Minute)))
	f.WriteSchedules(t, "fast", "@every 1s", apptest.NamesOf(projects))
	log, stop := f.startDaemon(t)
	apptest.Eventually(t, "a skipped tick recorded", func() bool {
		var n uint64
		// The daemon creates the table at its start: until then, no rows.
		err := f.DB.Conn.QueryRow(context.Background(), "SELECT count() FROM "+f.DB.Table("sync_runs")+
			" WHERE status = 'skipped' AND trigger = 'cron' AND schedule = 'fast'").Scan(&n)
		return err == nil && n > 0
	}, log.String)
	// The reads the fast project gained across a skipped tick say so.
	apptest.Eventually(t, "a gain across a skipped tick", func() bool {
		var n uint64
		err := f.DB.Conn.QueryRow(context.Background(), "SELECT count() FROM "+f.DB.Table("project_read_gains")+" WHERE missed_ticks > 0").Scan(&n)
		return err == nil && n > 0
	}, log.String)
	stop()
	// Each interval counts the ticks recorded strictly inside it.
	var ticks []uint32
	for _, line := range sinktest.Lines(t, f.DB.Conn, "SELECT DISTINCT toString(toUInt32(snapshot_at)) FROM "+f.DB.Table("sync_runs")+
		" WHERE trigger = 'cron' AND schedule = 'fast'") {
		var at uint32
		fmt.Sscan(line, &at)
		ticks = append(ticks, at)
	}
	for _, line := range sinktest.Lines(t, f.DB.Conn, "SELECT concat(toString(toUInt32(snapshot_at)), ' ', toString(toUInt32(prev_snapshot_at)), ' ', toString(missed_ticks)) FROM "+
		f.DB.Table("project_read_gains")+" WHERE prev_snapshot_at IS NOT NULL") {
		var at, prev uint32
		var missed int
		fmt.Sscan(line, &at, &prev, &missed)
		want := 0
		for _, tick := range ticks {
			if tick > prev && tick < at {
				want++
			}
		}
		if missed != want {
			t.Errorf("gain at %d since %d: %d missed ticks, want the %d recorded between", at, prev, missed, want)
		}
	}
	if !strings.Contains(log.String(), `"level":"WARN","msg":"pass skipped: the previous pass of this schedule is still running","schedule":"fast"`) {
		t.Errorf("the skipped tick is not logged as a warning:\n%s", log.String())
	}
	c := coverage(t, f, "fast")
	if c[3] == 0 || c[1]+c[3] > c[0] {
		t.Errorf("schedule_coverage due, run, ok, skipped, missed = %v: want skipped ticks among those due", c)
	}
}
