package resort_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/schema/migrate"
	"github.com/readsync/readsync/sink/schema/resort"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// createPreviousSnapshots creates message_read_snapshots in db as releases
// up to 0.5.0 did, sorted by message first, for migrations to adopt.
func createPreviousSnapshots(t *testing.T, db *sinktest.DB) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + strings.Split(db.Table("x"), ".")[0],
		"CREATE TABLE " + db.Table("message_read_snapshots") + ` (project_id Int64, message_id Int64, snapshot_at DateTime, read_count UInt64,
total UInt64, percent Float64, fetched_at DateTime, version UInt64, schedule String) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(snapshot_at) ORDER BY (project_id, message_id, snapshot_at)`,
	} {
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}

// sortKey is the sort key of db's table.
func sortKey(t *testing.T, db *sinktest.DB, table string) string {
	t.Helper()
	got := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT sorting_key FROM system.tables WHERE database = '%s' AND name = '%s'", db.Name, table))
	if len(got) != 1 {
		return ""
	}
	return got[0]
}

// snapshotRows are the distinct rows of a snapshot table, each as text.
func snapshotRows(t *testing.T, db *sinktest.DB, table string) []string {
	t.Helper()
	rows := sinktest.Lines(t, db.Conn, "SELECT DISTINCT concat(toString(project_id), ' ', toString(message_id), ' ', toString(toUInt32(snapshot_at)), ' ', toString(version), ' ', toString(read_count)) FROM "+db.Table(table))
	slices.Sort(rows)
	return rows
}

// A database of release 0.5.0, its snapshots sorted by message first,
// moves onto the sort key in the background, a partition and a range of
// projects at a time, while a process of that release goes on writing
// and a step is cut off in the middle: after the move the table holds
// every row it held and every row written meanwhile, under the new key,
// and every view equals its brute force.
func TestMoveToTheSortKeyFromPreviousRelease(t *testing.T) {
	t.Parallel()
	db := sinktest.New(t)
	createPreviousSnapshots(t, db)
	opts := []clickhouse.Option{clickhouse.WithReconcileSettle(time.Second), clickhouse.WithResort(resort.Options{Settle: time.Second, StepRows: 40, Lease: migrate.Lease(10 * time.Second)})}
	ch := historytest.OpenSink(t, db.DSN, opts...)
	ctx := context.Background()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sortKey(t, db, "message_read_snapshots"); got != "project_id, message_id, snapshot_at" {
		t.Fatalf("the previous release's table has the sort key %q", got)
	}
	// Its history: two months.
	h := historytest.NewHistory(t, ch)
	h.Generate(false)
	for i := range 3 {
		h.Pass(time.Date(2026, 4, 2, 8*i, 0, 0, 0, time.UTC))
	}

	// A process of the previous release goes on writing, straight into
	// the table, through the whole move.
	stopWriter := startPreviousReleaseWriter(ctx, t, db.Conn, db.Table("message_read_snapshots"), 1)
	before := snapshotRows(t, db, "message_read_snapshots")
	partitions := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT DISTINCT partition FROM system.parts WHERE active AND database = '%s' AND table = 'message_read_snapshots'", db.Name))

	m := &moveSteps{ctx: ctx, t: t, phases: map[string]int{}}
	m.step(ch) // set up
	m.step(ch) // the first range of the first partition
	// A step cut off in the middle, as a process killed: the next process
	// resumes from the last step recorded. A server that a client dying
	// in the middle of a statement takes down is reached through a proxy
	// that keeps the server's side open until the statement ends.
	cut := ch
	if sinktest.Lacks(sinktest.SurvivesKilledClient) {
		cut = historytest.OpenSink(t, db.NewProxy(t).DSN, opts...)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, _ = cut.ResortStep(cctx)
	cancel()
	ch2 := historytest.OpenSink(t, db.DSN, opts...)
	m.finish(ch2)
	written := stopWriter()
	if m.phases["setup"] != 1 || m.phases["copied"] != len(partitions) || m.phases["copy"] == 0 || m.phases["swapped"] != 1 {
		t.Errorf("the move's steps: %v, want a setup, copies of ranges, each of the %d partitions copied and a swap", m.phases, len(partitions))
	}
	if got := sortKey(t, db, "message_read_snapshots"); got != "project_id, snapshot_at, message_id" {
		t.Errorf("after the move, message_read_snapshots has the sort key %q", got)
	}
	if got := sortKey(t, db, schema.PresortSnapshots); got != "project_id, message_id, snapshot_at" {
		t.Errorf("the table as the previous release sorted it is not kept: %q", got)
	}
	after := snapshotRows(t, db, "message_read_snapshots")
	for _, r := range before {
		if _, found := slices.BinarySearch(after, r); !found {
			t.Errorf("row %s lost in the move", r)
		}
	}
	theirs := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT toString(count(DISTINCT (snapshot_at, version))) FROM %s WHERE version >= %d",
		db.Table("message_read_snapshots"), uint64(1<<50)))
	if want := fmt.Sprint(written); len(theirs) != 1 || theirs[0] != want {
		t.Errorf("after the move, the table holds %v of the %s rows the previous release wrote during it", theirs, want)
	}
	if rep, err := ch2.ResortStep(ctx); err != nil || !rep.Done || rep.Phase != "" {
		t.Errorf("a step after the move: %+v, %v; want nothing left", rep, err)
	}
	// The views take the rows written through the moved table.
	h2 := historytest.NewHistory(t, ch2)
	h2.Version = h.Version
	h2.Pass(time.Date(2026, 4, 20, 0, 0, 0, 0, time.UTC))
	sinktest.AwaitSettled(t, db.Conn, time.Second) // WithReconcileSettle
	if _, err := ch2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	historytest.AssertVerified(t, ch2, time.Time{})
}

// startPreviousReleaseWriter inserts a row every 50 ms into table through
// conn, as a process of release 0.5.0 would, from the start of the move to
// its end: message 101 of projects 1 to projects in turn, versions from
// 1<<50 on. A write that finds no table (between the two renames of a
// swap), or a table dropped under it (on a cluster, 18.16 may resolve a
// Distributed write's local table as the swap drops it), is dropped, as
// readsync would retry or spool it; any other error
// fails the test. stop ends the writes once one begun after the call has
// landed (a write after the move, the table swapped), and returns how many
// landed.
func startPreviousReleaseWriter(ctx context.Context, t *testing.T, conn driver.Conn, table string, projects int) (stop func() int) {
	var (
		written int
		werr    error
		done    = make(chan struct{})
		wg      sync.WaitGroup
		// begun counts the writes begun; landed is the count at the
		// start of the last write that landed.
		begun, landed atomic.Int64
	)
	wg.Go(func() {
		at := time.Date(2026, 4, 10, 0, 0, 0, 0, time.UTC)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			n := begun.Add(1)
			batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" (project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version, schedule)")
			if err == nil {
				ts := at.Add(time.Duration(i) * time.Minute)
				err = batch.Append(int64(1+i%projects), int64(101), ts, uint64(1000+i), uint64(5000), 1.0, ts, uint64(1<<50+i), "")
				if err == nil {
					err = batch.Send()
				}
			}
			switch {
			case err == nil:
				written++
				landed.Store(n)
			case !strings.Contains(err.Error(), "doesn't exist") && !strings.Contains(err.Error(), "does not exist") &&
				!strings.Contains(err.Error(), "Table is dropped"):
				werr = errors.Join(werr, err)
			}
		}
	})
	return func() int {
		t.Helper()
		mark := begun.Load()
		deadline := time.Now().Add(time.Minute)
		for landed.Load() <= mark && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		close(done)
		wg.Wait()
		if werr != nil {
			t.Fatalf("the previous release's writes: %v", werr)
		}
		if landed.Load() <= mark {
			t.Fatal("no write of the previous release landed in the minute after the move")
		}
		return written
	}
}

// moveSteps runs the move's steps and counts them by phase.
type moveSteps struct {
	ctx    context.Context
	t      *testing.T
	phases map[string]int
}

// step runs one step through ch and waits as long as it says.
func (m *moveSteps) step(ch *clickhouse.ClickHouse) resort.Report {
	m.t.Helper()
	rep, err := ch.ResortStep(m.ctx)
	if err != nil {
		m.t.Fatal(err)
	}
	m.phases[rep.Phase]++
	time.Sleep(rep.Wait)
	return rep
}

// finish runs steps through ch until nothing is left to move.
func (m *moveSteps) finish(ch *clickhouse.ClickHouse) {
	m.t.Helper()
	for i := 0; ; i++ {
		if i > 200 {
			m.t.Fatal("the move did not end in 200 steps")
		}
		if rep := m.step(ch); rep.Done {
			return
		}
	}
}
