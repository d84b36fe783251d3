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

// importHistory inserts, by hand and in one INSERT … SELECT, perMessage
// earlier snapshots of every message of the first snapshot the database
// holds, a minute apart before it: what a user importing another
// exporter's history does, and what a long outage's replay or a backfill
// of past days look like to the reconcile. It returns the rows inserted.
func (f *fixture) importHistory(t *testing.T, perMessage int) uint64 {
	t.Helper()
	ctx := context.Background()
	cols := sinktest.Lines(t, f.DB.Conn, fmt.Sprintf("SELECT name FROM system.columns WHERE database = '%s' AND table = 'message_read_snapshots'", f.DB.Name))
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = c
		if c == "snapshot_at" {
			exprs[i] = "toDateTime(toUInt32(snapshot_at) - (number + 1) * 60)"
		}
	}
	table := f.DB.Table("message_read_snapshots")
	q := fmt.Sprintf(`INSERT INTO %s (%s)
SELECT %s FROM (SELECT * FROM %s WHERE snapshot_at = (SELECT min(snapshot_at) FROM %s)) ARRAY JOIN range(%d) AS number`,
		table, strings.Join(cols, ", "), strings.Join(exprs, ", "), table, table, perMessage)
	var before, after uint64
	f.Query(t, "SELECT count() FROM {db}.message_read_snapshots", &before)
	if err := f.DB.Conn.Exec(ctx, q); err != nil {
		t.Fatalf("import the history: %v\n%s", err, q)
	}
	f.Query(t, "SELECT count() FROM {db}.message_read_snapshots", &after)
	return after - before
}

// reconcileState reads the position of the last reconcile step recorded
// and how many changes waited after it.
func (f *fixture) reconcileState(t *testing.T) (steps, pending uint64, position string) {
	t.Helper()
	f.Query(t, `SELECT count(), argMax(pending_changes, (changes_to, cursor_project_id, cursor_snapshot_at)),
  toString(max((changes_to, cursor_project_id, cursor_snapshot_at)))
FROM {db}.reconciles WHERE keyset = 1`, &steps, &pending, &position)
	return steps, pending, position
}

// backlogFixture is a fixture of 40 projects of 25 messages on a fast
// schedule, its daemon reaching ClickHouse through a proxy where the
// server does not survive a killed client.
func backlogFixture(t *testing.T, spec string) *fixture {
	t.Helper()
	projects := apitest.Generate(40, 25, 28)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	if sinktest.Lacks(sinktest.SurvivesKilledClient) {
		f.Env["READSYNC_CLICKHOUSE_DSN"] = f.DB.NewProxy(t).DSN
	}
	f.WriteSchedules(t, "fast", spec, apptest.NamesOf(projects))
	f.Env["READSYNC_LOG_LEVEL"] = "info"
	return f
}

// A million earlier snapshots inserted by hand while a daemon runs on a
// fast schedule: the reconcile drains them in bounded steps beside the
// passes, every tick of the schedule runs and is recorded ok, no step
// fails, and after it every view equals its brute force.
func TestDaemonDrainsABacklogWhileEveryTickRuns(t *testing.T) {
	// Not in parallel with the other tests: it asks every tick of a
	// five-second schedule to finish in time, which a loaded machine's
	// tick may not.
	f := backlogFixture(t, "@every 5s")
	d := f.StartReadsync(t)
	var oks uint64
	apptest.Eventually(t, "two passes", func() bool {
		_ = f.DB.Conn.QueryRow(context.Background(), "SELECT count() FROM "+f.DB.Table("sync_runs")+" WHERE status = 'ok'").Scan(&oks)
		return oks >= 2
	}, d.Log.String)

	rows := f.importHistory(t, 1000)
	if rows < 1_000_000 {
		t.Fatalf("imported %d rows, want a million or more", rows)
	}
	caughtUp := func() bool {
		steps, pending, _ := f.reconcileState(t)
		return strings.Contains(d.Log.String(), "reconcile caught up") && steps > 0 && pending < 1000
	}
	deadline := time.Now().Add(5 * time.Minute)
	for !caughtUp() {
		if time.Now().After(deadline) {
			t.Fatalf("the reconcile did not drain a backlog of %d rows within 5 minutes; log:\n%s", rows, d.Log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A few more ticks after the catch-up, then a clean stop.
	var before uint64
	f.Query(t, "SELECT count() FROM {db}.sync_runs", &before)
	apptest.Eventually(t, "two more ticks", func() bool {
		var n uint64
		_ = f.DB.Conn.QueryRow(context.Background(), "SELECT count() FROM "+f.DB.Table("sync_runs")).Scan(&n)
		return n >= before+2
	}, d.Log.String)
	if code := d.Stop(t); code != ExitOK {
		t.Fatalf("daemon exit %d; log:\n%s", code, d.Log.String())
	}

	log := d.Log.String()
	for _, want := range []string{"reconcile catching up", "reconcile caught up"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q", want)
		}
	}
	if strings.Contains(log, "reconcile step failed") {
		t.Errorf("a reconcile step failed; log:\n%s", log)
	}
	var ticks, notOK, first, last uint64
	var statuses string
	f.Query(t, `SELECT count(), countIf(status != 'ok'), toUInt64(min(snapshot_at)), toUInt64(max(snapshot_at)),
  toString(groupArrayIf((snapshot_at, status, error), status != 'ok'))
FROM {db}.sync_runs WHERE schedule = 'fast' AND trigger = 'cron'`, &ticks, &notOK, &first, &last, &statuses)
	if notOK != 0 {
		t.Errorf("%d of %d ticks recorded other than ok: %s", notOK, ticks, statuses)
	}
	if want := (last-first)/5 + 1; ticks != want {
		t.Errorf("%d ticks recorded from the first to the last, want every one of %d", ticks, want)
	}
	if code, stdout, stderr := f.run(t, "--verify"); code != ExitOK {
		t.Errorf("--verify after the catch-up: exit %d\n%s%s", code, stdout, stderr)
	}
}

// A daemon killed with SIGKILL in the middle of the catch-up of an import
// behind a deep history loses at most the step it was in: the next one
// resumes from the last step recorded and completes, and every view then
// equals its brute force.
func TestCatchUpResumesAfterSIGKILL(t *testing.T) {
	t.Parallel()
	// Passes far apart: the catch-up is what runs.
	f := backlogFixture(t, "@every 1h")
	if code, _, stderr := f.run(t, "--backfill"); code != ExitOK {
		t.Fatalf("--backfill: exit %d\n%s", code, stderr)
	}
	// A history of 200 snapshots a message, caught up (a one-off command
	// drains the reconcile before it exits), then an import of 1 000
	// earlier snapshots a message behind it.
	f.importHistory(t, 200)
	if code, _, stderr := f.run(t, "--flush-spool"); code != ExitOK {
		t.Fatalf("--flush-spool: exit %d\n%s", code, stderr)
	}
	stepsBefore, _, _ := f.reconcileState(t)
	f.importHistory(t, 1000)

	// A step of this daemon's catch-up, not the last one --flush-spool
	// recorded, which may have left changes younger than the settle delay.
	d := f.StartReadsync(t)
	apptest.Eventually(t, "a step of the catch-up", func() bool {
		steps, pending, _ := f.reconcileState(t)
		return steps > stepsBefore && pending > 0
	}, d.Log.String)
	d.Kill()
	stepsAtKill, pendingAtKill, position := f.reconcileState(t)
	if pendingAtKill == 0 {
		t.Fatalf("the catch-up was over when the daemon was killed: the test killed nothing that mattered; log:\n%s", d.Log.String())
	}

	// Caught up, and nothing left but what the last seconds changed (the
	// ticks the daemon recorded as missed at its start, say): a catch-up
	// that ends while the import's last changes are younger than the
	// settle delay reads them at its next step.
	d2 := f.StartReadsync(t)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if _, pending, _ := f.reconcileState(t); pending <= 100 && strings.Contains(d2.Log.String(), "reconcile caught up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the catch-up did not complete after the restart; log:\n%s", d2.Log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code := d2.Stop(t); code != ExitOK {
		t.Fatalf("daemon exit %d; log:\n%s", code, d2.Log.String())
	}
	// The restart resumed where the last step recorded before the kill
	// ended: no change was read by two recorded steps.
	var read, distinct uint64
	f.Query(t, "SELECT sum(changed_snapshots) FROM {db}.reconciles WHERE keyset = 1", &read)
	f.Query(t, "SELECT count() FROM (SELECT DISTINCT changed_at, project_id, snapshot_at FROM {db}.snapshot_changes)", &distinct)
	if read > distinct {
		t.Errorf("the steps read %d snapshot changes of %d: the restart read again what the %d steps before the kill (up to %s) had read",
			read, distinct, stepsAtKill, position)
	}
	if code, stdout, stderr := f.run(t, "--verify"); code != ExitOK {
		t.Errorf("--verify after the resumed catch-up: exit %d\n%s%s", code, stdout, stderr)
	}
}
