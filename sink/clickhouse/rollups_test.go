package clickhouse_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/spool"
)

// createBruteForceViews creates 0.1.0's views under the names
// brute_<view>, and the brute force of the per-snapshot view: the rows of
// each project's newest write at each snapshot, deduplicated.
func createBruteForceViews(t *testing.T, db *sinktest.DB) {
	t.Helper()
	ctx := sinktest.PreviousRelease(context.Background(), t, db.Conn)
	for _, stmt := range sinktest.FirstReleaseSchema(t, db.Name) {
		if !strings.HasPrefix(stmt, "CREATE VIEW") {
			continue
		}
		for _, v := range []string{"message_read_latest", "project_read_daily"} {
			stmt = strings.Replace(stmt, db.Table(v), db.Table("brute_"+v), 1)
		}
		if err := db.Conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%v\n%s", err, stmt)
		}
	}
	stmt := fmt.Sprintf(`CREATE VIEW %s AS
SELECT snapshot_at, project_id, nft, project_name, messages, reads, total, if(total = 0, 0, reads / total) AS read_rate
FROM
(
    SELECT project_id, snapshot_at, count() AS messages, sum(read_count) AS reads, sum(total) AS total
    FROM %s FINAL
    WHERE (project_id, snapshot_at, version) IN
        (SELECT project_id, snapshot_at, max(version) FROM %s GROUP BY project_id, snapshot_at)
    GROUP BY project_id, snapshot_at
)
AS l ANY LEFT JOIN (SELECT id AS project_id, nft, name AS project_name FROM %s FINAL) AS r USING (project_id)`,
		db.Table("brute_project_read_snapshots"), db.Table("message_read_snapshots"), db.Table("message_read_snapshots"), db.Table("projects"))
	if err := db.Conn.Exec(ctx, stmt); err != nil {
		t.Fatalf("%v\n%s", err, stmt)
	}
}

// viewColumns are each view's columns, and the order that makes its rows
// comparable.
var viewColumns = map[string]struct{ columns, order string }{
	"message_read_latest":    {"project_id, nft, project_name, message_id, subject, snapshot_at, read_count, total, percent", "project_id, message_id"},
	"project_read_daily":     {"day, project_id, nft, project_name, messages, reads, total, read_rate", "project_id, day"},
	"project_read_snapshots": {"snapshot_at, project_id, nft, project_name, messages, reads, total, read_rate", "project_id, snapshot_at"},
}

// viewRows returns the rows of a view as text, one line per row, every
// column formatted by ClickHouse so that floats compare exactly.
func viewRows(t *testing.T, db *sinktest.DB, view, where string, pushDown bool) []string {
	t.Helper()
	vc := viewColumns[strings.TrimPrefix(view, "brute_")]
	var cols []string
	for _, c := range strings.Split(vc.columns, ", ") {
		cols = append(cols, "toString("+c+")")
	}
	q := fmt.Sprintf("SELECT arrayStringConcat([%s], '\t') FROM %s %s ORDER BY %s", strings.Join(cols, ", "), db.Table(view), where, vc.order)
	if pushDown {
		q += " SETTINGS enable_optimize_predicate_expression = 1"
	}
	ctx := context.Background()
	if strings.HasPrefix(view, "brute_") {
		// The brute force is the first release's views.
		ctx = sinktest.PreviousRelease(ctx, t, db.Conn)
	}
	return sinktest.LinesContext(ctx, t, db.Conn, q)
}

// assertViewsEqualBruteForce compares every view with its brute force,
// whole and filtered to one project with the filter pushed down, as the
// docs/dashboards.md tells 18.16 users to query.
func assertViewsEqualBruteForce(t *testing.T, db *sinktest.DB, project int64, views ...string) {
	t.Helper()
	for _, view := range views {
		for _, filter := range []struct {
			where    string
			pushDown bool
		}{
			{"", false},
			{fmt.Sprintf("WHERE project_id = %d", project), true},
			{fmt.Sprintf("WHERE project_id = %d", project), false},
		} {
			got := viewRows(t, db, view, filter.where, filter.pushDown)
			want := viewRows(t, db, "brute_"+view, filter.where, false)
			if len(want) == 0 {
				t.Fatalf("%s %s: the brute force has no rows; the fixture is wrong", view, filter.where)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s %s (push down %v) differs from the brute force:\n%s", view, filter.where, filter.pushDown, diffLines(got, want))
			}
		}
	}
}

func diffLines(got, want []string) string {
	var b strings.Builder
	g := map[string]bool{}
	for _, s := range got {
		g[s] = true
	}
	w := map[string]bool{}
	for _, s := range want {
		w[s] = true
		if !g[s] {
			fmt.Fprintf(&b, "missing: %s\n", s)
		}
	}
	for _, s := range got {
		if !w[s] {
			fmt.Fprintf(&b, "extra:   %s\n", s)
		}
	}
	fmt.Fprintf(&b, "(%d rows, want %d)", len(got), len(want))
	return b.String()
}

// history writes generated passes the way readsync writes them: each
// project fetched at a snapshot gets its own version, all of its rows
// share it, and a pass's rows go out in shared batches. Around the regular
// passes it does everything else readsync does to the snapshot table.
type history struct {
	t       *testing.T
	ch      *clickhouse.ClickHouse
	rnd     *rand.Rand
	version uint64
	// reads holds each message's read count, which only grows.
	reads map[[2]int64]uint64
	// deleted messages are no longer listed upstream.
	deleted map[[2]int64]bool
}

// historySchedule is the schedule whose ticks history's passes run.
const historySchedule = "every-4h"

const (
	historyProjects = 4
	historyMessages = 6
)

func newHistory(t *testing.T, ch *clickhouse.ClickHouse) *history {
	return &history{t: t, ch: ch, rnd: rand.New(rand.NewPCG(10, 10)), version: 1 << 40,
		reads: map[[2]int64]uint64{}, deleted: map[[2]int64]bool{}}
}

func (h *history) nextVersion() uint64 { h.version += 1 + uint64(h.rnd.IntN(1000)); return h.version }

// fetch returns the rows of one complete fetch of project p at snapshot
// at: its project row and the snapshots of its listed messages.
func (h *history) fetch(p int64, at time.Time, v uint64) sink.Batch {
	ts := sink.TimeOf(at)
	b := sink.Batch{Projects: []sink.Project{{ID: p, NFT: fmt.Sprintf("p%d.eth", p), Name: fmt.Sprintf("Project %d", p),
		CreateAt: ts, Raw: "{}", FetchedAt: ts, Version: v}}}
	for m := int64(1); m <= historyMessages; m++ {
		key := [2]int64{p, m}
		if h.deleted[key] {
			continue
		}
		b.Messages = append(b.Messages, sink.Message{ProjectID: p, ID: p*100 + m, Subject: fmt.Sprintf("m%d", m),
			CreateAt: ts, FetchedAt: ts, Version: v})
		if m == historyMessages {
			continue // never has read_data: no snapshot row
		}
		h.reads[key] += uint64(h.rnd.IntN(5))
		total := uint64(10 + m)
		if p == 4 && m == 1 {
			// Counts near the top of UInt64 must survive the rollups'
			// encoding exactly.
			total = math.MaxUint64 - uint64(h.rnd.IntN(5))
			h.reads[key] += 1 << 63
		}
		b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: p*100 + m, SnapshotAt: ts, FetchedAt: ts,
			ReadCount: h.reads[key], Total: total, Percent: float64(100*h.reads[key]) / float64(total), Version: v})
	}
	return b
}

// pass fetches every project at at, writing the rows in batches that
// split projects between INSERTs, as a large pass does, and records the
// tick.
func (h *history) pass(at time.Time) {
	h.t.Helper()
	defer h.recordTick(at, "ok")
	var all sink.Batch
	for p := int64(1); p <= historyProjects; p++ {
		f := h.fetch(p, at, h.nextVersion())
		all.Projects = append(all.Projects, f.Projects...)
		all.Messages = append(all.Messages, f.Messages...)
		all.Snapshots = append(all.Snapshots, f.Snapshots...)
	}
	split := 7 // not a multiple of a project's rows
	for len(all.Snapshots) > 0 {
		n := min(split, len(all.Snapshots))
		h.write(&sink.Batch{Snapshots: all.Snapshots[:n], Schedule: historySchedule})
		all.Snapshots = all.Snapshots[n:]
	}
	h.write(&sink.Batch{Projects: all.Projects, Messages: all.Messages, Schedule: historySchedule})
}

// recordTick records a tick of historySchedule at at with status.
func (h *history) recordTick(at time.Time, status string) {
	h.t.Helper()
	r := sink.Run{RunID: fmt.Sprintf("%s-%d-%d", status, at.Unix(), h.nextVersion()), Schedule: historySchedule, Trigger: "cron",
		SnapshotAt: at, StartedAt: at, FinishedAt: at, Status: status}
	if err := h.ch.RecordRun(context.Background(), r); err != nil {
		h.t.Fatal(err)
	}
}

func (h *history) write(b *sink.Batch) {
	h.t.Helper()
	if err := h.ch.Write(context.Background(), b); err != nil {
		h.t.Fatal(err)
	}
}

// generate writes three days of passes every four hours and, among them,
// the other ways rows reach the snapshot table. With redeliver, one spool
// entry is delivered twice.
func (h *history) generate(redeliver bool) {
	day0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var spooled []sink.Batch
	// A message sent mid-history, listed from tick 8 on.
	h.deleted[[2]int64{2, 5}] = true
	for i := 0; i < 18; i++ {
		at := day0.Add(time.Duration(i) * 4 * time.Hour)
		switch i {
		case 4:
			// A message not listed for a while, from day 0 to day 2.
			h.deleted[[2]int64{3, 3}] = true
		case 8:
			delete(h.deleted, [2]int64{2, 5})
		case 13:
			// A tick missed: readsync was down.
			h.recordTick(at, "missed")
			continue
		case 15:
			delete(h.deleted, [2]int64{3, 3})
			// A message left out of one list and back in the next, on
			// the same day.
			h.deleted[[2]int64{4, 3}] = true
		case 16:
			delete(h.deleted, [2]int64{4, 3})
		case 3:
			// The same tick run twice: the second run's rows are newer
			// versions of the same keys.
			h.pass(at)
			h.pass(at)
			continue
		case 5:
			// A pass whose rows were spooled while ClickHouse was down,
			// replayed after later passes were written.
			for p := int64(1); p <= historyProjects; p++ {
				spooled = append(spooled, h.fetch(p, at, h.nextVersion()))
			}
			h.recordTick(at, "ok")
			continue
		case 7:
			// A retried list: the failed attempt streamed part of the
			// project's rows before breaking off; the retry writes all of
			// them with a newer version.
			f := h.fetch(2, at, h.nextVersion())
			h.write(&sink.Batch{Snapshots: f.Snapshots[:2]})
			h.pass(at)
			continue
		case 9:
			// A message deleted upstream: it keeps its earlier
			// snapshots of the day but is absent from later ones.
			h.deleted[[2]int64{3, 2}] = true
		case 11:
			for _, b := range spooled {
				h.write(&b)
			}
			if redeliver {
				// The same spool entry delivered again, as after a
				// crash between the INSERT and the entry's removal.
				h.write(&spooled[0])
			}
		}
		h.pass(at)
	}
	// A backfill with --snapshot-at in the past, fetched now: a newer
	// version at an older snapshot, which must not become the latest.
	for p := int64(1); p <= 2; p++ {
		b := h.fetch(p, day0.Add(30*time.Hour), h.nextVersion())
		h.write(&b)
	}
	// A project fetched once only, at the very start, out of order.
	b := h.fetch(4, day0.Add(-time.Hour), h.nextVersion())
	h.write(&b)
}

// TestViewsEqualBruteForce writes generated history through the sink and
// compares every view with the brute-force argMax over the whole snapshot
// history, exactly.
func TestViewsEqualBruteForce(t *testing.T) {
	ch, db := openTestSink(t)
	createBruteForceViews(t, db)
	newHistory(t, ch).generate(false)
	assertViewsEqualBruteForce(t, db, 3, allViews...)
	// Merges change how the rollups' rows are stored, never what the views
	// return.
	for _, table := range []string{"message_read_snapshots", "message_read_latest_rollup", "message_read_daily_rollup", "project_read_snapshot_rollup"} {
		if err := db.Conn.Exec(context.Background(), "OPTIMIZE TABLE "+db.Table(table)+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	assertViewsEqualBruteForce(t, db, 3, allViews...)
}

// TestViewsEqualBruteForceRedelivered delivers one write twice, as a
// spool replay of an INSERT that reached the server does. Every view picks
// one row per key (the per-snapshot view a refresh of the newest write,
// not a sum), so all of them stay exact, whether the server drops the
// repeated INSERT by its token (current releases) or keeps it (18.16).
func TestViewsEqualBruteForceRedelivered(t *testing.T) {
	ch, db := openTestSink(t)
	createBruteForceViews(t, db)
	newHistory(t, ch).generate(true)
	assertViewsEqualBruteForce(t, db, 1, allViews...)
}

// A spool entry whose INSERT reached the server but whose answer was lost
// is replayed with the same rows: every view counts it once, on a server
// that drops the repeat by its deduplication token and on 18.16, which
// keeps it.
func TestSpoolReplayOfADeliveredEntry(t *testing.T) {
	ch, db := openTestSink(t)
	ctx := context.Background()
	at := sink.TimeOf(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	b := sink.Batch{Projects: []sink.Project{{ID: 1, NFT: "p.eth", Name: "P", CreateAt: at, FetchedAt: at, Version: 7}}}
	for m := int64(1); m <= 3; m++ {
		b.Messages = append(b.Messages, sink.Message{ProjectID: 1, ID: m, Subject: "s", CreateAt: at, FetchedAt: at, Version: 7})
		b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: 1, MessageID: m, SnapshotAt: at, ReadCount: uint64(10 * m), Total: 100, Percent: float64(10 * m), FetchedAt: at, Version: 7})
	}
	sp, err := spool.Open(t.TempDir(), 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	if err := sp.PutBatch(&b); err != nil {
		t.Fatal(err)
	}
	if err := ch.Write(ctx, &b); err != nil { // the first attempt reached the server
		t.Fatal(err)
	}
	if n, err := sp.Flush(ctx, ch); err != nil || n != 1 { // and its entry is replayed
		t.Fatalf("flushed %d entries: %v", n, err)
	}
	want := "3\t60\t300"
	got := sinktest.Lines(t, db.Conn, "SELECT arrayStringConcat([toString(messages), toString(reads), toString(total)], '\t') FROM "+db.Table("project_read_snapshots"))
	if strings.Join(got, "\n") != want {
		t.Errorf("project_read_snapshots after a replay of a delivered entry: %q, want %q", got, want)
	}
	for view, q := range map[string]string{
		"message_read_latest":      "SELECT toString(sum(read_count)) FROM " + db.Table("message_read_latest"),
		"project_read_daily":       "SELECT toString(reads) FROM " + db.Table("project_read_daily"),
		"project_read_gains":       "SELECT toString(reads_gained) FROM " + db.Table("project_read_gains"),
		"project_read_daily_gains": "SELECT toString(reads_gained) FROM " + db.Table("project_read_daily_gains"),
	} {
		if got := sinktest.Lines(t, db.Conn, q); strings.Join(got, "") != "60" {
			t.Errorf("%s after a replay: %q, want 60", view, got)
		}
	}
	if n := db.Count(t, "message_read_snapshots"); n != 3 {
		t.Errorf("%d snapshot rows under FINAL, want 3", n)
	}
}

var allViews = []string{"message_read_latest", "project_read_daily", "project_read_snapshots"}

// TestFoldPreviousRelease upgrades a database written by 0.1.0:
// its history is folded into the rollups at migration, a partition at a
// time with progress in the log, and the views then equal the brute force
// over all of it, old rows and new.
func TestFoldPreviousRelease(t *testing.T) {
	db := sinktest.New(t)
	ctx := context.Background()
	for _, stmt := range sinktest.FirstReleaseSchema(t, db.Name) {
		if err := db.Conn.Exec(sinktest.PreviousRelease(ctx, t, db.Conn), stmt); err != nil {
			t.Fatalf("%v\n%s", err, stmt)
		}
	}
	var logs bytes.Buffer
	ch := openSink(t, db.DSN, clickhouse.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	// 0.1.0 wrote the history: its tables take the same
	// INSERTs. Writing migrates, so the history goes in before.
	old := newHistory(t, nil)
	var rows []sink.Batch
	for i := 0; i < 12; i++ {
		// Two months, so that the fold has two partitions.
		at := time.Date(2026, 2, 27, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 8 * time.Hour)
		for p := int64(1); p <= historyProjects; p++ {
			rows = append(rows, old.fetch(p, at, old.nextVersion()))
		}
	}
	for _, b := range rows {
		insertDirect(t, db, b)
	}

	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"partition=202602 done=1 of=2", "partition=202603 done=2 of=2"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not report the fold of a partition (%s):\n%s", want, logs.String())
		}
	}
	// Writes after the upgrade go through the materialized views.
	h := newHistory(t, ch)
	h.version = old.version
	h.reads = old.reads
	h.pass(time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC))
	h.pass(time.Date(2026, 3, 2, 4, 0, 0, 0, time.UTC))

	createBruteForceViews(t, db)
	assertViewsEqualBruteForce(t, db, 2, allViews...)
	assertGainsEqualBruteForce(t, db, historySchedule, 2)

	// A second start finds the rollups current and folds nothing again.
	logs.Reset()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "fold") {
		t.Errorf("a second migration folded again:\n%s", logs.String())
	}
	// A step that ran but was not recorded (the process died in between)
	// runs again: folding the history a second time changes nothing.
	if err := db.Conn.Exec(ctx, "TRUNCATE TABLE "+db.Table("schema_migrations")); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "folded snapshot partition") {
		t.Fatalf("the step did not run again:\n%s", logs.String())
	}
	assertViewsEqualBruteForce(t, db, 2, allViews...)
	assertGainsEqualBruteForce(t, db, historySchedule, 2)
}

// insertDirect writes a batch's rows with INSERTs of their own, as
// 0.1.0 did, without migrating.
func insertDirect(t *testing.T, db *sinktest.DB, b sink.Batch) {
	t.Helper()
	insert := func(table, columns string, n int, row func(i int) []any) {
		batch, err := db.Conn.PrepareBatch(context.Background(), fmt.Sprintf("INSERT INTO %s (%s)", db.Table(table), columns))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := batch.Append(row(i)...); err != nil {
				t.Fatal(err)
			}
		}
		if err := batch.Send(); err != nil {
			t.Fatal(err)
		}
	}
	insert("projects", "id, nft, name, raw, version", len(b.Projects), func(i int) []any {
		p := b.Projects[i]
		return []any{p.ID, p.NFT, p.Name, p.Raw, p.Version}
	})
	insert("messages", "project_id, id, subject, version", len(b.Messages), func(i int) []any {
		m := b.Messages[i]
		return []any{m.ProjectID, m.ID, m.Subject, m.Version}
	})
	insert("message_read_snapshots", "project_id, message_id, snapshot_at, read_count, total, percent, version", len(b.Snapshots), func(i int) []any {
		s := b.Snapshots[i]
		return []any{s.ProjectID, s.MessageID, s.SnapshotAt.Time(), s.ReadCount, s.Total, s.Percent, s.Version}
	})
}

// TestDayRefreshesLandInAnyOrder lands a refresh of a project's day that
// saw fewer rows after one that saw more, as two writers racing would: the
// day's values stay those of the refresh that saw more.
func TestDayRefreshesLandInAnyOrder(t *testing.T) {
	ch, db := openTestSink(t)
	createBruteForceViews(t, db)
	ctx := context.Background()
	h := newHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.pass(day.Add(8 * time.Hour))
	if err := db.Conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s AS %s", db.Table("stale"), db.Table("project_read_day_rollup"))); err != nil {
		t.Fatal(err)
	}
	if err := db.Conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT * FROM %s", db.Table("stale"), db.Table("project_read_day_rollup"))); err != nil {
		t.Fatal(err)
	}
	h.deleted[[2]int64{1, 1}] = true // the later pass lists one message fewer
	h.pass(day.Add(20 * time.Hour))
	// A pass at the same snapshot, fetched again: same messages, newer
	// versions.
	h.pass(day.Add(20 * time.Hour))
	if err := db.Conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT * FROM %s", db.Table("project_read_day_rollup"), db.Table("stale"))); err != nil {
		t.Fatal(err)
	}
	assertViewsEqualBruteForce(t, db, 1, "project_read_daily")
}
