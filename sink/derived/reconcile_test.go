package derived_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// Rows that reach message_read_snapshots without readsync's refresh (a
// process killed between its INSERT and the refresh, a process of an
// earlier release, rows inserted by hand), and ticks recorded after the
// gains around them were computed, leave views stale until the next
// reconcile, which finds them in the changes the server recorded and
// refreshes them; a reconcile of what is current rewrites nothing.
func TestReconcileRefreshesWhatChanged(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	h := historytest.NewHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.Pass(day.Add(4 * time.Hour))
	h.Pass(day.Add(8 * time.Hour))
	reconcile := func() derived.ReconcileReport {
		t.Helper()
		rep, err := ch.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := reconcile(); rep.ChangedSnapshots == 0 || rep.Rewritten != 0 {
		t.Errorf("reconcile after passes refreshed at once: %+v, want the passes' snapshots read and no row rewritten", rep)
	}

	// By hand: a pass at 16:00 whose refresh never ran, and one at 12:00
	// (a replay written late: 16:00's previous snapshot), and the tick
	// of 20:00 recorded as missed, inside the interval of a snapshot
	// written at 24:00.
	for _, at := range []time.Duration{16, 12} {
		for p := int64(1); p <= historytest.Projects; p++ {
			b := h.Fetch(p, day.Add(at*time.Hour), h.NextVersion())
			historytest.InsertDirect(t, db, b)
		}
	}
	h.Pass(day.Add(24 * time.Hour))
	h.RecordTick(day.Add(20*time.Hour), "missed")
	rep, err := ch.Verify(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clean() {
		t.Fatal("the views are current before the reconcile: the test writes nothing they miss")
	}
	rep2 := reconcile()
	if rep2.Rewritten == 0 || rep2.ChangedTicks == 0 {
		t.Errorf("reconcile: %+v, want rows rewritten and the late tick read", rep2)
	}
	historytest.AssertVerified(t, ch, time.Time{})
	if rep := reconcile(); rep.Rewritten != 0 {
		t.Errorf("a second reconcile rewrote %d rows of what was current", rep.Rewritten)
	}
}

// A backlog drains in steps of at most the limit, each from where the
// one before ended: every change is read once, a step after the last
// reads nothing, and every view equals its brute force.
func TestReconcileStepsReadEachChangeOnce(t *testing.T) {
	db := sinktest.New(t)
	ch := historytest.OpenSettled(t, db)
	ctx := context.Background()
	h := historytest.NewHistory(t, ch)
	n := historytest.WriteUnrefreshed(t, db, h, 20, time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC))

	const limit = 7
	read, steps := 0, 0
	for {
		rep, err := ch.ReconcileStep(ctx, "", limit)
		if err != nil {
			t.Fatal(err)
		}
		if rep.ChangedSnapshots > limit {
			t.Fatalf("a step read %d changes, over its limit of %d", rep.ChangedSnapshots, limit)
		}
		read += rep.ChangedSnapshots
		steps++
		if rep.CaughtUp {
			if rep.Pending != 0 {
				t.Errorf("caught up with %d changes waiting", rep.Pending)
			}
			break
		}
		if rep.Pending == 0 {
			t.Errorf("step %d: not caught up, and nothing waits", steps)
		}
	}
	if read != n || steps != n/limit+1 {
		t.Errorf("%d steps read %d project snapshot changes, want %d steps reading each of %d once", steps, read, n/limit+1, n)
	}
	if rep, err := ch.ReconcileStep(ctx, "", limit); err != nil || rep.ChangedSnapshots != 0 || rep.Refreshed != 0 {
		t.Errorf("a step after the backlog drained: %+v, %v; want nothing read", rep, err)
	}
	historytest.AssertVerified(t, ch, time.Time{})
}

// Three daemons beside one backlog, as the pods of a StatefulSet: one
// runs the steps and the others leave them to it, so the backlog is read
// once (but for a step two may start together), and the views are right.
func TestDaemonsShareOneBacklog(t *testing.T) {
	db := sinktest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	chs := []*clickhouse.ClickHouse{historytest.OpenSettled(t, db), historytest.OpenSettled(t, db), historytest.OpenSettled(t, db)}
	h := historytest.NewHistory(t, chs[0])
	n := historytest.WriteUnrefreshed(t, db, h, 30, time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC))

	const limit = 5
	var loops sync.WaitGroup
	deferred := make([]int, len(chs))
	var mu sync.Mutex
	for i, ch := range chs {
		l := derived.NewLoop(derived.LoopConfig{Steps: ch, Ready: func() bool { return true }, Owner: fmt.Sprintf("readsync-%d", i),
			Limit: limit, Settle: time.Second, Idle: 100 * time.Millisecond, StepTimeout: time.Minute, Grace: time.Minute,
			Observe: func(rep derived.StepReport, _ time.Duration, err error) {
				if err != nil {
					t.Errorf("readsync-%d: step failed: %v", i, err)
				}
				if rep.HeldBy != "" {
					mu.Lock()
					deferred[i]++
					mu.Unlock()
				}
			}})
		loops.Go(func() { l.Run(ctx) })
	}
	stop := func() { cancel(); loops.Wait() }
	defer stop()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var read, pending uint64
		row := db.Conn.QueryRow(ctx, "SELECT sum(changed_snapshots), argMax(pending_changes, (changes_to, cursor_project_id, cursor_snapshot_at)) FROM "+
			db.Table("reconciles")+" WHERE keyset = 1 AND changed_snapshots > 0")
		if err := row.Scan(&read, &pending); err != nil {
			t.Fatal(err)
		}
		if read >= uint64(n) && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backlog of %d changes did not drain in two minutes: %d read, %d waiting", n, read, pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()

	owners := sinktest.Lines(t, db.Conn, "SELECT owner FROM "+db.Table("reconciles")+" WHERE keyset = 1 AND changed_snapshots > 0 GROUP BY owner ORDER BY count() DESC")
	var read uint64
	if err := db.Conn.QueryRow(context.Background(), "SELECT sum(changed_snapshots) FROM "+db.Table("reconciles")+" WHERE keyset = 1").Scan(&read); err != nil {
		t.Fatal(err)
	}
	if read > uint64(n+limit) {
		t.Errorf("the daemons read %d changes of a backlog of %d: more than one step (%d) twice", read, n, limit)
	}
	if len(owners) == 0 {
		t.Fatal("no step recorded")
	}
	var steps, others uint64
	q := fmt.Sprintf("SELECT count(), countIf(owner != '%s') FROM %s WHERE keyset = 1 AND changed_snapshots > 0", owners[0], db.Table("reconciles"))
	if err := db.Conn.QueryRow(context.Background(), q).Scan(&steps, &others); err != nil {
		t.Fatal(err)
	}
	if others > 1 {
		t.Errorf("%s ran %d of %d steps and the others %d: they did not leave the work to one", owners[0], steps-others, steps, others)
	}
	if deferred[0]+deferred[1]+deferred[2] == 0 {
		t.Error("no daemon left a step to another")
	}
	historytest.AssertVerified(t, chs[0], time.Time{})
}

// A daemon that stopped in the middle of a backlog holds the steps for
// its lease only: a daemon with the default lease leaves them to it, one
// with a lease of two seconds takes them over once two seconds have passed
// since the dead one's last step, by the server's clock, and drains the
// backlog; the views are then right.
func TestReconcileTakesOverFromADeadHolder(t *testing.T) {
	db := sinktest.New(t)
	ctx := context.Background()
	dead := historytest.OpenSettled(t, db)
	h := historytest.NewHistory(t, dead)
	historytest.WriteUnrefreshed(t, db, h, 4, time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC))
	const limit = 5
	if rep, err := dead.ReconcileStep(ctx, "readsync-0", limit); err != nil || rep.HeldBy != "" || rep.ChangedSnapshots == 0 || rep.CaughtUp {
		t.Fatalf("the first daemon's step: %+v, %v; want changes read and more waiting", rep, err)
	}
	// readsync-0 stops here, its steps recorded.
	if rep, err := historytest.OpenSettled(t, db).ReconcileStep(ctx, "readsync-1", limit); err != nil || rep.HeldBy != "readsync-0" {
		t.Errorf("a daemon with a lease of %s beside the stopped one: %+v, %v; want the steps left to readsync-0", derived.Lease, rep, err)
	}

	const lease = 2 * time.Second
	quick := historytest.OpenSink(t, db.DSN, clickhouse.WithReconcileSettle(time.Second), clickhouse.WithReconcileLease(lease))
	if err := quick.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		rep, err := quick.ReconcileStep(ctx, "readsync-2", limit)
		if err != nil {
			t.Fatal(err)
		}
		if rep.HeldBy == "" {
			break
		}
		if rep.HeldBy != "readsync-0" {
			t.Fatalf("a step left to %s, want readsync-0", rep.HeldBy)
		}
		if time.Now().After(deadline) {
			t.Fatalf("readsync-2 did not take the steps over in a minute, a lease of %s", lease)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; ; i++ {
		if i == 10 {
			t.Fatal("readsync-2 did not drain the backlog in 10 steps")
		}
		rep, err := quick.ReconcileStep(ctx, "readsync-2", limit)
		if err != nil || rep.HeldBy != "" {
			t.Fatalf("a step of readsync-2 after it took over: %+v, %v", rep, err)
		}
		if rep.CaughtUp {
			break
		}
	}
	var gap int64
	var read uint64
	q := fmt.Sprintf(`SELECT toInt64(minIf(toUInt32(started_at), owner = 'readsync-2')) - toInt64(maxIf(toUInt32(started_at), owner = 'readsync-0')),
    sumIf(changed_snapshots, owner = 'readsync-2')
FROM %s WHERE keyset = 1`, db.Table("reconciles"))
	if err := db.Conn.QueryRow(ctx, q).Scan(&gap, &read); err != nil {
		t.Fatal(err)
	}
	if gap < int64(lease/time.Second) {
		t.Errorf("readsync-2 recorded its first step %d s after readsync-0's last, within the lease of %s", gap, lease)
	}
	if read == 0 {
		t.Error("readsync-2 read no change of the backlog")
	}
	historytest.AssertVerified(t, quick, time.Time{})
}

// A recomputation that died before it recorded its end counts as
// running for the refresh lease after its start: the reconcile does not
// leave a write made within that lease to its writer's refresh, and does
// once the lease passed. One of project 1 that started ten seconds before
// project 1's write keeps the write from its writer under the lease of
// five minutes, and no longer under one of two seconds.
func TestRefreshLeaseEndsADeadRecomputation(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []clickhouse.Option
		left bool
	}{
		{"default", nil, false},
		{"2s", []clickhouse.Option{clickhouse.WithRefreshLease(2 * time.Second)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := sinktest.New(t)
			ctx := context.Background()
			ch := historytest.OpenSink(t, db.DSN, append(c.opts, clickhouse.WithReconcileSettle(time.Second))...)
			if err := ch.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			q := fmt.Sprintf("INSERT INTO %s (kind, at, refresh_id, project_id, snapshot_at, read_at) SELECT %d, now() - 10, 7, toInt64(1), toDateTime(0), now() - 10",
				db.Table(schema.Refreshes), schema.RefreshStarts)
			if err := db.Conn.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
			h := historytest.NewHistory(t, ch)
			b := h.Fetch(1, time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC), h.NextVersion())
			h.Write(&b)
			sinktest.AwaitSettled(t, db.Conn, time.Second) // WithReconcileSettle
			rep, err := ch.ReconcileStep(ctx, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if c.left {
				want = rep.ChangedSnapshots
			}
			if rep.ChangedSnapshots == 0 || rep.LeftToWriters != want {
				t.Errorf("the reconcile left %d of %d changed snapshots to their writer, want %d", rep.LeftToWriters, rep.ChangedSnapshots, want)
			}
			historytest.AssertVerified(t, ch, time.Time{})
		})
	}
}

// A database release 0.4.0 migrated and reconciled (schema version 7)
// holds records of its reconciles without a position. After the upgrade
// (migration 8), the first step reads from 15 minutes before the last
// one's end, as that release's next reconcile would have, and no further
// back; the views are then right.
func TestReconcileUpgradeFrom0_4(t *testing.T) {
	db := sinktest.New(t)
	ctx := context.Background()
	historytest.MigrateFirst(t, db.DSN, 7)
	exec := func(q string) {
		t.Helper()
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	// The table as 0.4.0 created it.
	for _, c := range []string{"keyset", "cursor_project_id", "cursor_snapshot_at", "tick_changes_to", "tick_cursor_schedule", "tick_cursor_tick", "owner", "pending_changes"} {
		exec(fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", db.Table("reconciles"), c))
	}
	// What 0.4.0 left: its last reconcile, which ended 5 minutes ago; a
	// change by hand 30 minutes ago, which it read, and one 10 minutes
	// ago, within its overlap; then rows written without their refresh.
	exec(fmt.Sprintf(`INSERT INTO %s (started_at, changes_from, changes_to, changed_snapshots, changed_ticks, refreshed_snapshots, rewritten_gains, duration_ms)
SELECT now() - 300, now() - 3600, now() - 300, 0, 0, 0, 0, 0`, db.Table("reconciles")))
	exec(fmt.Sprintf("INSERT INTO %s (changed_at, project_id, snapshot_at) SELECT now() - 1800, 1, toDateTime('2026-03-01 04:00:00')", db.Table("snapshot_changes")))
	exec(fmt.Sprintf("INSERT INTO %s (changed_at, project_id, snapshot_at) SELECT now() - 600, 2, toDateTime('2026-03-01 04:00:00')", db.Table("snapshot_changes")))
	ch := historytest.OpenSettled(t, db)
	h := historytest.NewHistory(t, ch)
	n := historytest.WriteUnrefreshed(t, db, h, 2, time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC))

	rep, err := ch.ReconcileStep(ctx, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ChangedSnapshots != n+1 {
		t.Errorf("the first step read %d changes, want the %d written since and the one within the overlap", rep.ChangedSnapshots, n)
	}
	historytest.AssertVerified(t, ch, time.Time{})
}

// On a new database a reconcile reads each change log from its oldest
// change, not from 1970 through windows that widen to it, and past the
// server's time in one read, not in windows that widen to the end of
// time: a one-off command's reconcile of changes a few seconds old reads
// the logs in a few statements (26 before), and reads every change.
func TestReconcileOnANewDatabaseStartsAtTheOldestChange(t *testing.T) {
	db := sinktest.New(t)
	costs := sinktest.NewCosts()
	ch := historytest.OpenSettled(t, db, clickhouse.WithIntercept(costs.Wrap))
	ctx := context.Background()
	h := historytest.NewHistory(t, ch)
	n := historytest.WriteUnrefreshed(t, db, h, 5, time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC))
	sinktest.AwaitSettled(t, db.Conn, time.Second)
	costs.Take()
	rep, err := ch.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ChangedSnapshots != n {
		t.Errorf("a reconcile on a new database read %d project snapshot changes, want all %d", rep.ChangedSnapshots, n)
	}
	reads := map[string]int{}
	for _, s := range costs.Take() {
		for _, log := range []string{schema.SnapshotChanges, schema.TickChanges} {
			if strings.HasPrefix(s.Text, "SELECT DISTINCT") && strings.Contains(s.Text, "FROM "+db.Table(log)+"\n") {
				reads[log]++
			}
		}
	}
	// The step that reads the changes: one read a log from the oldest
	// change to the horizon. The read of what is younger than the horizon,
	// after the position that step recorded: its second's rest (two reads)
	// and one read on from it; one read of the empty tick log.
	for log, want := range map[string]int{schema.SnapshotChanges: 1 + 3, schema.TickChanges: 1 + 1} {
		if reads[log] != want {
			t.Errorf("the reconcile read %s in %d statements, want %d", log, reads[log], want)
		}
	}
	historytest.AssertVerified(t, ch, time.Time{})
}

// What waits is counted up to derived.PendingCap a change log, however
// long the backlog: the count reads about as many rows, not the backlog.
func TestReconcileCountsWhatWaitsUpToACap(t *testing.T) {
	db := sinktest.New(t)
	costs := sinktest.NewCosts()
	ch := historytest.OpenSink(t, db.DSN, clickhouse.WithReconcileSettle(time.Second), clickhouse.WithIntercept(costs.Wrap))
	ctx := context.Background()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// A backlog of twice the cap, a project snapshot a row, inserted by
	// hand: changed, never refreshed.
	const backlog = 2 * derived.PendingCap
	q := fmt.Sprintf(`INSERT INTO %s (project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version)
SELECT 1 + number %% 100, 1, toDateTime(1767225600 + 60 * intDiv(number, 100)), 1, 1, 1, now(), 1 FROM numbers(%d)`,
		db.Table("message_read_snapshots"), backlog)
	if err := db.Conn.Exec(ctx, q); err != nil {
		t.Fatal(err)
	}
	sinktest.AwaitSettled(t, db.Conn, time.Second)
	costs.Take()
	rep, err := ch.ReconcileStep(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if rep.CaughtUp || rep.Pending != derived.PendingCap {
		t.Errorf("after a step of 10 changes of %d: %d counted as waiting, caught up %v; want %d, not caught up", backlog, rep.Pending, rep.CaughtUp, derived.PendingCap)
	}
	stmts := costs.Take()
	costs.Read(t, db.Conn, stmts)
	for _, s := range stmts {
		if strings.Contains(s.Text, "count() FROM (SELECT 1") && s.Rows > derived.PendingCap+4*schema.FineGranularity {
			t.Errorf("counting what waits read %d rows of a backlog of %d, over the cap of %d and four granules", s.Rows, backlog, derived.PendingCap)
		}
	}
}

// atInsert runs its hook, once set, at the next INSERT into table that
// sends rows (rows) or that selects them on the server (INSERT … SELECT,
// an Exec), before the server sees it; a hook that returns an error fails
// that INSERT, as a write killed there stops.
type atInsert struct {
	driver.Conn
	table string
	rows  bool
	hook  atomic.Pointer[func() error]
}

// intercept puts a between a sink and its connection.
func (a *atInsert) intercept() clickhouse.Option {
	return clickhouse.WithIntercept(func(c driver.Conn) driver.Conn { a.Conn = c; return a })
}

// set arms hook; fired reports whether it ran since.
func (a *atInsert) set(hook func() error) { a.hook.Store(&hook) }
func (a *atInsert) fired() bool           { return a.hook.Load() == nil }

func (a *atInsert) run(q string, rows bool) error {
	if rows == a.rows && strings.HasPrefix(q, "INSERT INTO "+a.table+" ") {
		if hook := a.hook.Swap(nil); hook != nil {
			return (*hook)()
		}
	}
	return nil
}

func (a *atInsert) Exec(ctx context.Context, q string, args ...any) error {
	if err := a.run(q, false); err != nil {
		return err
	}
	return a.Conn.Exec(ctx, q, args...)
}

func (a *atInsert) PrepareBatch(ctx context.Context, q string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if err := a.run(q, true); err != nil {
		return nil, err
	}
	return a.Conn.PrepareBatch(ctx, q, opts...)
}

// Two writes of one project snapshot in one second, the first refreshed
// at the tip, the second stopped between its rows and its refresh: the
// change log holds one change for both (its times are seconds), which the
// first's record of its refresh covers. The second recorded, before its
// rows, that its project is being recomputed, so the reconcile does not
// take the change for the first's alone and recomputes it: every view
// then equals its brute force, the second write's message included.
func TestReconcileRecomputesAWriteStoppedInTheSecondOfAnother(t *testing.T) {
	db := sinktest.New(t)
	// The age fill is the step of a write after its rows and before its
	// refresh.
	fail := &atInsert{table: db.Table(schema.AgeRollup)}
	ch := historytest.OpenSettled(t, db, fail.intercept())
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC)
	ts := sink.TimeOf(at)
	write := func(project, message int64) error {
		m := sink.Message{ProjectID: project, ID: message, Subject: "s", CreateAt: sink.TimeOf(at.Add(-time.Hour)), FetchedAt: ts, Version: uint64(message)}
		return ch.Write(ctx, &sink.Batch{
			Projects:  []sink.Project{{ID: project, NFT: fmt.Sprintf("p%d.eth", project), Name: "P", Raw: "{}", FetchedAt: ts, Version: uint64(message)}},
			Messages:  []sink.Message{m},
			Snapshots: []sink.Snapshot{{ProjectID: project, MessageID: message, SnapshotAt: ts, FetchedAt: ts, ReadCount: 10 * uint64(message), Total: 100, Percent: 10, Version: uint64(message)}},
		})
	}
	// The seconds cannot be chosen: the pair is written again, for
	// another project, until both changes and the first refresh's record
	// fell in one second.
	collided := int64(0)
	for project := int64(1); project <= 20 && collided == 0; project++ {
		if err := write(project, 1); err != nil {
			t.Fatal(err)
		}
		fail.set(func() error { return errors.New("the write stops before its refresh") })
		if err := write(project, 2); err == nil {
			t.Fatal("the second write went through: the test stopped nothing")
		}
		var changes, doneInIt uint64
		f := func(q string, dst ...any) {
			t.Helper()
			if err := db.Conn.QueryRow(ctx, q).Scan(dst...); err != nil {
				t.Fatal(err)
			}
		}
		changeLog := fmt.Sprintf("%s WHERE project_id = %d", db.Table(schema.SnapshotChanges), project)
		f("SELECT uniqExact(changed_at) FROM "+changeLog, &changes)
		f(fmt.Sprintf("SELECT count() FROM %s WHERE kind = %d AND project_id = %d AND at = (SELECT any(changed_at) FROM %s)",
			db.Table(schema.Refreshes), schema.RefreshDone, project, changeLog), &doneInIt)
		if changes == 1 && doneInIt > 0 {
			collided = project
		}
	}
	if collided == 0 {
		t.Fatal("in 20 tries, the two writes and the first's refresh never fell in one second")
	}
	sinktest.AwaitSettled(t, db.Conn, time.Second)
	for {
		rep, err := ch.ReconcileStep(ctx, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if rep.CaughtUp {
			break
		}
	}
	historytest.AssertVerified(t, ch, time.Time{})
}
