package derived_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// speedCounts adds up what the refreshes after writes logged of their
// speeds: the messages whose rows were carried forward, and those
// computed from their curves.
type speedCounts struct {
	mu                  sync.Mutex
	carried, fromCurves int64
}

func (c *speedCounts) Enabled(context.Context, slog.Level) bool { return true }

func (c *speedCounts) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "speeds refreshed" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "carried":
			c.carried += a.Value.Int64()
		case "from_curves":
			c.fromCurves += a.Value.Int64()
		}
		return true
	})
	return nil
}

func (c *speedCounts) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *speedCounts) WithGroup(string) slog.Handler      { return c }

func (c *speedCounts) take() (carried, fromCurves int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	carried, fromCurves, c.carried, c.fromCurves = c.carried, c.fromCurves, 0, 0
	return carried, fromCurves
}

// assertSpeedsOfCurves holds every row of the speed rollup (FINAL), every
// column, to the row computed from the message's whole curve in the age
// rollup: the brute force, speedValues over every age row.
func assertSpeedsOfCurves(t *testing.T, db *sinktest.DB, when string) {
	t.Helper()
	cols := schema.SpeedColumnList()
	stored := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT toString(tuple(%s)) FROM %s FINAL ORDER BY project_id, message_id", cols, db.Table(schema.SpeedRollup)))
	brute := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT toString(tuple(%s)) FROM (%s) ORDER BY project_id, message_id", cols,
		schema.SpeedOfCurves(chconn.NewNames(db.Name, chconn.Topology{}), "1")))
	if len(brute) == 0 {
		t.Fatalf("%s: no curve", when)
	}
	if !slices.Equal(stored, brute) {
		t.Fatalf("%s: the speed rollup differs from the speeds of the whole curves (columns %s):\n%s", when, cols, historytest.DiffLines(stored, brute))
	}
}

// The speeds the writes carry forward equal, after every write, the
// speeds of the whole curves, every column of the rollup (what the next
// write carries included): many messages growing on random curves, in
// bursts, flat, first seen days after their creation, whose counts fall
// at times, written by hourly then daily passes, with writes of earlier
// snapshots out of order. Most rows are carried; the others (a message's
// first, the writes out of order, the falls, a share that moves into a
// bucket between its own and the latest, as on the random curves' steady
// growth in hourly buckets) are computed from their curves.
func TestSpeedsCarriedEqualTheirCurves(t *testing.T) {
	db := sinktest.New(t)
	counts := &speedCounts{}
	ch := historytest.OpenSink(t, db.DSN, clickhouse.WithLogger(slog.New(counts)))
	ctx := context.Background()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(45, 2026))
	start := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	type message struct {
		project, id int64
		kind        string
		created     time.Time
		reads       uint64
	}
	kinds := []string{"random", "bursts", "flat", "late", "falls"}
	var messages []*message
	for p := int64(1); p <= 3; p++ {
		for i := range int64(12) {
			m := &message{project: p, id: p*100 + i, kind: kinds[int(i)%len(kinds)],
				created: start.Add(time.Duration(rng.IntN(30*60)) * time.Minute)}
			if m.kind == "late" {
				m.created = m.created.Add(-time.Duration(30+rng.IntN(100)) * time.Hour)
			}
			messages = append(messages, m)
		}
	}
	grow := func(m *message) {
		switch m.kind {
		case "random":
			m.reads += uint64(rng.IntN(20))
		case "bursts":
			if rng.IntN(6) == 0 {
				m.reads += uint64(rng.IntN(500))
			}
		case "late":
			m.reads += uint64(rng.IntN(3))
		case "falls":
			if rng.IntN(4) == 0 && m.reads > 0 {
				m.reads -= uint64(rng.IntN(int(min(m.reads, 30))))
			} else {
				m.reads += uint64(rng.IntN(40))
			}
		}
	}
	// Hourly passes for four days, then daily for six, each a write per
	// project of its messages created by then, some skipped now and then.
	var passes []time.Time
	for at := start.Add(time.Hour); at.Before(start.Add(96 * time.Hour)); at = at.Add(time.Hour) {
		passes = append(passes, at)
	}
	for d := 5; d <= 10; d++ {
		passes = append(passes, start.Add(time.Duration(d)*24*time.Hour))
	}
	version := uint64(1)
	write := func(p int64, at time.Time, withMessages bool, pick func(*message) bool) {
		version++
		b := sink.Batch{Schedule: "hourly"}
		ts := sink.TimeOf(at)
		if withMessages {
			b.Projects = []sink.Project{{ID: p, NFT: fmt.Sprintf("p%d.eth", p), Name: fmt.Sprintf("Project %d", p), Raw: "{}", FetchedAt: ts, Version: version}}
		}
		for _, m := range messages {
			if m.project != p || at.Before(m.created) || !pick(m) {
				continue
			}
			if withMessages {
				b.Messages = append(b.Messages, sink.Message{ProjectID: p, ID: m.id, Subject: m.kind, CreateAt: sink.TimeOf(m.created), FetchedAt: ts, Version: version})
			}
			b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: m.id, SnapshotAt: ts, FetchedAt: ts,
				ReadCount: m.reads, Total: 10_000, Percent: float64(m.reads) / 100, Version: version})
		}
		if len(b.Snapshots) == 0 {
			return
		}
		if err := ch.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	var carried, fromCurves int64
	for i, at := range passes {
		for _, m := range messages {
			grow(m)
		}
		for p := int64(1); p <= 3; p++ {
			write(p, at, true, func(m *message) bool { return m.kind != "late" || at.Sub(m.created) > 96*time.Hour || rng.IntN(9) == 0 })
		}
		if i%9 == 8 {
			// Out of order: project 2's snapshots of half an hour after
			// an earlier pass, written now.
			earlier := passes[rng.IntN(i)].Add(30 * time.Minute)
			write(2, earlier, false, func(*message) bool { return rng.IntN(2) == 0 })
		}
		c, f := counts.take()
		carried, fromCurves = carried+c, fromCurves+f
		assertSpeedsOfCurves(t, db, fmt.Sprintf("after the pass at %v", at))
	}
	t.Logf("over %d passes, %d speed rows carried forward, %d computed from their curves", len(passes), carried, fromCurves)
	if fromCurves == 0 || carried <= fromCurves {
		t.Errorf("%d speed rows carried forward and %d computed from their curves; want both, and mostly carried", carried, fromCurves)
	}
	if n := db.Count(t, schema.SpeedRollup); n != uint64(len(messages)) {
		t.Errorf("%s holds %d rows, want one for each of the %d messages", schema.SpeedRollup, n, len(messages))
	}
	// And the views equal their brute force over the raw snapshots.
	historytest.AssertVerified(t, ch, time.Time{})
}

// A reconcile step that adds snapshots older than a message's latest (an
// import of another exporter's history) and computes its speed from the
// curve while a write carries the speed forward from the row it read
// before the step wrote its own: the write's row, of a higher version,
// would hide the older snapshots; the write sees that it raced the step
// and computes the message's speed from its curve again. Every speed
// then equals its curve, and the views their brute force.
func TestSpeedsCarriedPastARacingRecomputation(t *testing.T) {
	db := sinktest.New(t)
	// The write of carried speed rows, where a recomputation that ran
	// between a write's read of the rows it carries forward and its write
	// of them falls.
	race := &atInsert{table: db.Table(schema.SpeedRollup), rows: true}
	ch := historytest.OpenSettled(t, db, race.intercept())
	ctx := context.Background()
	created := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	const messages = 5
	write := func(at time.Time, version uint64) {
		t.Helper()
		ts := sink.TimeOf(at)
		b := sink.Batch{Schedule: "hourly", Projects: []sink.Project{{ID: 1, NFT: "p1.eth", Name: "Project 1", Raw: "{}", FetchedAt: ts, Version: version}}}
		hours := uint64(at.Sub(created) / time.Hour)
		for m := int64(1); m <= messages; m++ {
			b.Messages = append(b.Messages, sink.Message{ProjectID: 1, ID: m, Subject: "s", CreateAt: sink.TimeOf(created), FetchedAt: ts, Version: version})
			b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: 1, MessageID: m, SnapshotAt: ts, FetchedAt: ts,
				ReadCount: 100 + hours*uint64(m), Total: 10_000, Percent: 1, Version: version})
		}
		if err := ch.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	// First seen 30 hours after their creation, hourly since.
	for h := 30; h < 36; h++ {
		write(created.Add(time.Duration(h)*time.Hour), uint64(h))
	}
	assertSpeedsOfCurves(t, db, "before the import")
	// An import of their first day, hour by hour, with fewer reads: it
	// moves every speed's first age, its reads at 1, 6 and 24 hours and
	// the bucket that first reached half its reads.
	if err := db.Conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (project_id, message_id, snapshot_at, fetched_at, read_count, total, percent, version)
SELECT 1, m, s, s, toUInt64(h * 3), 10000, 1, 1
FROM (SELECT toUInt64(modulo(number, %d) + 1) AS m, intDiv(number, %d) AS h, toDateTime('2026-03-01 00:30:00') + h * 3600 AS s FROM numbers(%d))`,
		db.Table("message_read_snapshots"), messages, messages, 24*messages)); err != nil {
		t.Fatal(err)
	}
	sinktest.AwaitSettled(t, db.Conn, time.Second)
	var step derived.StepReport
	race.set(func() error {
		rep, err := ch.ReconcileStep(ctx, "", 10_000)
		if err != nil {
			t.Error(err)
		}
		step = rep
		return nil
	})
	write(created.Add(36*time.Hour), 36)
	if !race.fired() {
		t.Fatal("the write carried no speed forward: the test raced nothing")
	}
	if step.ChangedSnapshots == 0 {
		t.Fatalf("the reconcile step in the write's refresh read no change (%+v): the test raced nothing", step)
	}
	assertSpeedsOfCurves(t, db, "after the write that raced the reconcile")
	historytest.AssertVerified(t, ch, time.Time{})
}
