// Command benchbi measures the dashboards at scale, as the "Dashboards stay
// fast as history grows" issue defines it. It drops and creates a scratch
// database, migrates it with readsync's own migrations (tables, rollups,
// views), generates a history of hourly passes with INSERT … SELECT (so the
// materialized views fill the rollups as they do for readsync's writes),
// adds 0.1.0's views under old_* names, and prints for each view
// query and each read panel of the Grafana dashboard the median of several
// runs, the old views' time beside the new, and the bytes on disk per
// snapshot row.
//
// Usage (make bench-bi runs it):
//
//	go run ./scripts/benchbi -dsn clickhouse://default:@127.0.0.1:19000/default
//	    [-projects 500 -messages 200 -days 30 -passes-per-day 24 -runs 5]
//
// It measures and asserts nothing: the exit code is 0 when every query ran.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/scripts/internal/benchdb"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	chsink "github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
)

type options struct {
	dsn          string
	database     string
	projects     int
	messages     int
	days         int
	passesPerDay int
	runs         int
	oldRuns      int
	dashboard    string
	oldSchema    string
	keep         bool
	queriesOnly  bool
	noVerify     bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("benchbi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "clickhouse://default:@127.0.0.1:19000/default", "ClickHouse native DSN (its database is ignored)")
	fs.StringVar(&o.database, "database", "readsync_bench_bi", "scratch database, dropped first")
	fs.IntVar(&o.projects, "projects", 500, "projects")
	fs.IntVar(&o.messages, "messages", 200, "messages per project")
	fs.IntVar(&o.days, "days", 30, "days of history")
	fs.IntVar(&o.passesPerDay, "passes-per-day", 24, "passes per day, evenly spaced")
	fs.IntVar(&o.runs, "runs", 5, "runs of each new query; the median is shown")
	fs.IntVar(&o.oldRuns, "old-runs", 5, "runs of each query on 0.1.0's views (0 skips them)")
	fs.StringVar(&o.dashboard, "dashboard", "deployments/grafana/readsync.json", "Grafana dashboard whose read panels are measured")
	fs.StringVar(&o.oldSchema, "old-schema", "sink/sinktest/testdata/release-0.1.0/schema.sql", "0.1.0's schema (statements ending with a line holding only ;)")
	fs.BoolVar(&o.keep, "keep", false, "reuse the scratch database when it holds the history already")
	fs.BoolVar(&o.queriesOnly, "queries-only", false, "time the queries only: no sizes, no pass written, no --verify")
	fs.BoolVar(&o.noVerify, "no-verify", false, "write and time the pass, but run no --verify after it")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if err := bench(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "bench-bi: %v\n", err)
		return 1
	}
	return 0
}

func bench(ctx context.Context, o options, stdout, stderr io.Writer) error {
	conn, err := benchdb.Open(ctx, o.dsn, "")
	if err != nil {
		return err
	}
	defer conn.Close()
	b := &bencher{conn: conn, o: o, db: "`" + o.database + "`"}
	release, err := benchdb.Version(ctx, conn)
	if err != nil {
		return err
	}
	// The previous release's views join subqueries without aliases,
	// which current servers take only with joined_subquery_requires_alias
	// off; readsync's own queries run with the server's defaults.
	if n, err := b.number(ctx, "SELECT count() FROM system.settings WHERE name = 'joined_subquery_requires_alias'"); err != nil {
		return err
	} else if n > 0 {
		b.legacy = clickhouse.Settings{"joined_subquery_requires_alias": 0}
	}

	rows := uint64(o.projects) * uint64(o.messages) * uint64(o.days) * uint64(o.passesPerDay)
	have, _ := b.number(ctx, "SELECT count() FROM "+b.db+".message_read_snapshots")
	if !o.keep || have < rows { // timePass adds a pass
		fmt.Fprintf(stderr, "bench-bi: generating %d snapshot rows in %s …\n", rows, o.database)
		start := time.Now()
		if err := b.generate(ctx, stderr); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench-bi: generated in %s\n", time.Since(start).Round(time.Second))
	}
	// A database kept from a run of an earlier release gets this one's
	// migrations (and their folds) before it is measured; on a database
	// just generated this applies nothing.
	start := time.Now()
	if err := b.migrate(ctx, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench-bi: migrations checked or applied in %s\n", time.Since(start).Round(time.Millisecond))
	if err := b.waitForMerges(ctx, stderr); err != nil {
		return err
	}
	if b.inDB, err = benchdb.Open(ctx, o.dsn, o.database); err != nil {
		return err
	}
	defer b.inDB.Close()
	qs, err := b.queries()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ClickHouse %s: %d projects × %d messages × %d days × %d passes a day = %d snapshot rows; median of %d runs (old views: %d)\n\n",
		release, o.projects, o.messages, o.days, o.passesPerDay, rows, o.runs, o.oldRuns)
	fmt.Fprintf(stdout, "%-70s %10s %10s %8s\n", "query", "old ms", "new ms", "rows")
	for _, q := range qs {
		newMS, n, err := b.median(ctx, q.new, o.runs)
		if err != nil {
			return fmt.Errorf("%s: %w", q.name, err)
		}
		old := "-"
		if o.oldRuns > 0 && q.old != "" {
			ms, _, err := b.median(b.legacyCtx(ctx), q.old, o.oldRuns)
			if err != nil {
				return fmt.Errorf("%s (old): %w", q.name, err)
			}
			old = fmt.Sprintf("%.0f", ms)
		}
		fmt.Fprintf(stdout, "%-70s %10s %10.1f %8d\n", q.name, old, newMS, n)
	}
	fmt.Fprintln(stdout)
	if o.queriesOnly {
		return nil
	}
	if err := b.printSizes(ctx, stdout, rows); err != nil {
		return err
	}
	return b.timePass(ctx, stdout)
}

// timePass writes one more pass through readsync's sink, every project at
// the tick after the history's last, as the daemon would, and prints how
// long its INSERTs took and how long the refreshes after them (the
// project days and the reads gained), which read the history.
func (b *bencher) timePass(ctx context.Context, w io.Writer) error {
	dsn, err := chconn.ParseDSN(strings.TrimSuffix(b.o.dsn, "/"+dsnDatabase(b.o.dsn)) + "/" + b.o.database)
	if err != nil {
		return err
	}
	ch, err := chsink.OpenClickHouse(ctx, dsn)
	if err != nil {
		return err
	}
	defer ch.Close()
	var inserts time.Duration
	ch.ObserveInserts(func(_ string, _ int, d time.Duration, _ error) { inserts += d })
	if err := ch.Migrate(ctx); err != nil {
		return err
	}
	// The tick after the newest stored: the history's first pass after its
	// last, or, on a database kept from earlier runs, after theirs.
	var newest uint32
	if err := b.conn.QueryRow(ctx, fmt.Sprintf("SELECT toUInt32(max(snapshot_at)) FROM %s.message_read_snapshots", b.db)).Scan(&newest); err != nil {
		return fmt.Errorf("read the newest snapshot: %w", err)
	}
	at := time.Unix(int64(newest), 0).UTC().Add(24 * time.Hour / time.Duration(b.o.passesPerDay))
	ts, version := sink.TimeOf(at), uint64(at.UnixNano())
	batch := &sink.Batch{Schedule: "bench"}
	for p := int64(1); p <= int64(b.o.projects); p++ {
		for m := int64(0); m < int64(b.o.messages); m++ {
			reads := uint64(b.o.days*b.o.passesPerDay + 50)
			batch.Snapshots = append(batch.Snapshots, sink.Snapshot{ProjectID: p, MessageID: p*1000000 + m, SnapshotAt: ts, FetchedAt: ts,
				ReadCount: reads, Total: 1000, Percent: float64(reads) / 10, Version: version + uint64(p)})
		}
	}
	// What the history's own generation left in the change logs (nothing:
	// the migration that creates them came after), so that the reconcile
	// below reads the pass's changes only.
	if _, err := ch.Reconcile(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	start := time.Now()
	if err := ch.Write(ctx, batch); err != nil {
		return fmt.Errorf("write a pass: %w", err)
	}
	all := time.Since(start)
	fmt.Fprintf(w, "\none more pass, %d snapshot rows in one batch: written in %d ms, of which INSERTs %d ms and refreshes (project days, reads gained) %d ms\n",
		len(batch.Snapshots), all.Milliseconds(), inserts.Milliseconds(), (all - inserts).Milliseconds())
	start = time.Now()
	rep, err := ch.Reconcile(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	fmt.Fprintf(w, "the reconcile after it: %d ms (%d project snapshots changed, %d refreshed, %d rows rewritten)\n",
		time.Since(start).Milliseconds(), rep.ChangedSnapshots, rep.Refreshed, rep.Rewritten)
	if b.o.noVerify {
		return nil
	}
	for _, window := range []struct {
		name  string
		since time.Time
	}{{"the whole history", time.Time{}}, {"the last two days", at.Add(-48 * time.Hour)}} {
		start = time.Now()
		rep, err := ch.Verify(ctx, window.since)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		var rows int
		for _, v := range rep.Views {
			rows += v.Rows
		}
		fmt.Fprintf(w, "readsync --verify over %s: %d ms, %d rows compared, clean: %v\n", window.name, time.Since(start).Milliseconds(), rows, rep.Clean())
	}
	return nil
}

// printSizes prints the bytes on disk per snapshot row of the snapshot
// table and of each rollup.
func (b *bencher) printSizes(ctx context.Context, w io.Writer, rows uint64) error {
	r, err := b.conn.Query(ctx, fmt.Sprintf(`SELECT table, sum(bytes_on_disk), sum(rows) FROM system.parts
WHERE database = '%s' AND active AND table IN ('message_read_snapshots', 'message_read_latest_rollup',
    'message_read_daily_rollup', 'project_read_snapshot_rollup', 'project_read_day_rollup', 'message_read_first_rollup',
    'project_read_gain_rollup', 'project_read_day_gain_rollup', 'message_read_hourly_rollup', 'project_read_hour_rollup',
    'project_read_hour_gain_rollup', 'message_read_age_rollup', 'message_read_speed_rollup')
GROUP BY table ORDER BY table`, b.o.database))
	if err != nil {
		return fmt.Errorf("read table sizes: %w", err)
	}
	defer r.Close()
	fmt.Fprintf(w, "%-32s %12s %12s %16s\n", "table", "rows", "MiB", "bytes/snapshot")
	var total uint64
	for r.Next() {
		var table string
		var bytes, n uint64
		if err := r.Scan(&table, &bytes, &n); err != nil {
			return err
		}
		total += bytes
		fmt.Fprintf(w, "%-32s %12d %12.1f %16.2f\n", table, n, float64(bytes)/(1<<20), float64(bytes)/float64(rows))
	}
	fmt.Fprintf(w, "%-32s %12s %12.1f %16.2f\n", "all", "", float64(total)/(1<<20), float64(total)/float64(rows))
	return r.Err()
}

type bencher struct {
	conn driver.Conn
	// inDB has the scratch database as its current one, as a dashboard's
	// data source has: the queries name tables without a database.
	inDB driver.Conn
	o    options
	db   string
	// legacy are the settings under which the server takes the previous
	// release's views: none on 18.16.
	legacy clickhouse.Settings
}

// legacyCtx is ctx with the settings of legacy.
func (b *bencher) legacyCtx(ctx context.Context) context.Context {
	return clickhouse.Context(ctx, clickhouse.WithSettings(b.legacy))
}

func (b *bencher) exec(ctx context.Context, q string) error {
	if err := b.conn.Exec(ctx, q); err != nil {
		head, _, _ := strings.Cut(q, "\n")
		return fmt.Errorf("%s: %w", head, err)
	}
	return nil
}

func (b *bencher) number(ctx context.Context, q string) (uint64, error) {
	var n uint64
	if err := b.conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", q, err)
	}
	return n, nil
}

// generate creates the scratch database as 0.1.0 did, fills it,
// and upgrades it with readsync's migrations, which fold the history into
// the rollups (their progress goes to stderr). Each pass writes every
// project with a version of its own, as readsync does; read counts grow by
// the hour. One INSERT per day keeps the parts few, as readsync's large
// batches do. The rollups hold what the materialized views would have
// written had the history gone through readsync: the equality tests check
// both ways.
func (b *bencher) generate(ctx context.Context, stderr io.Writer) error {
	if err := b.exec(ctx, "DROP DATABASE IF EXISTS "+b.db); err != nil {
		return err
	}
	old, err := previousSchema(b.o.oldSchema, b.o.database)
	if err != nil {
		return err
	}
	for _, s := range old {
		if err := b.exec(b.legacyCtx(ctx), s); err != nil {
			return err
		}
	}
	o := b.o
	if err := b.exec(ctx, fmt.Sprintf(`INSERT INTO %s.projects (id, nft, name, raw, version)
SELECT number + 1, concat('p', toString(number + 1), '.eth'), concat('Project ', toString(number + 1)), '{}', 1 FROM numbers(%d)`,
		b.db, o.projects)); err != nil {
		return err
	}
	// Each message created from 10 minutes to two days before the
	// history starts, so that every curve by age spans the history: 73
	// hourly ages and one a day after.
	if err := b.exec(ctx, fmt.Sprintf(`INSERT INTO %s.messages (project_id, id, subject, create_at, version)
SELECT intDiv(number, %d) + 1 AS p, p * 1000000 + number %% %d, concat('subject ', toString(number)),
    toDateTime('2026-03-01 00:00:00') - 600 - 3600 * (number %% 48), 1 FROM numbers(%d)`,
		b.db, o.messages, o.messages, o.projects*o.messages)); err != nil {
		return err
	}
	perPass := o.projects * o.messages
	step := 86400 / o.passesPerDay
	for d := 0; d < o.days; d++ {
		if err := b.exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.message_read_snapshots
    (project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version)
SELECT p, p * 1000000 + m AS mid, toDateTime('2026-03-01 00:00:00') + (%[2]d * %[3]d + pass) * %[4]d AS at,
    intHash32(mid) %% 50 + %[2]d * %[3]d + pass AS reads, toUInt64(1000) AS sent, round(100 * reads / sent, 2), at,
    toUInt64(at) * 1000000000 + p
FROM (SELECT intDiv(number, %[5]d) AS pass, intDiv(number %% %[5]d, %[6]d) + 1 AS p, number %% %[6]d AS m FROM numbers(%[7]d))`,
			b.db, d, o.passesPerDay, step, perPass, o.messages, perPass*o.passesPerDay)); err != nil {
			return err
		}
	}
	// The release's views, renamed, to time the old way beside the new.
	for _, s := range old {
		if !strings.HasPrefix(s, "CREATE VIEW") {
			continue
		}
		for _, v := range []string{"message_read_latest", "project_read_daily"} {
			s = strings.Replace(s, "`"+v+"`", "`old_"+v+"`", 1)
		}
		if err := b.exec(b.legacyCtx(ctx), s); err != nil {
			return err
		}
	}

	start := time.Now()
	if err := b.migrate(ctx, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench-bi: migrated (fold included) in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// migrate applies readsync's migrations to the scratch database, logging
// each step (and each fold's progress) to stderr.
func (b *bencher) migrate(ctx context.Context, stderr io.Writer) error {
	ch, err := benchdb.OpenMigrated(ctx, b.o.dsn, b.o.database, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	ch.Close()
	return nil
}

func dsnDatabase(dsn string) string {
	_, rest, _ := strings.Cut(dsn, "://")
	_, path, _ := strings.Cut(rest, "/")
	path, _, _ = strings.Cut(path, "?")
	return path
}

// previousSchema returns 0.1.0's statements (tables and views)
// for database db.
func previousSchema(file, db string) ([]string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("-old-schema: %w", err)
	}
	return sinktest.SplitScript(string(raw), db), nil
}

// waitForMerges waits until the server merges nothing in the scratch
// database, so that the timings measure the queries, not the merges
// competing with them for the two cores.
func (b *bencher) waitForMerges(ctx context.Context, stderr io.Writer) error {
	return benchdb.WaitForMerges(ctx, b.conn, b.o.database, func(n uint64) {
		fmt.Fprintf(stderr, "bench-bi: waiting for %d merges …\n", n)
	})
}

type query struct {
	name, old, new string
}

// pushDown is what the README tells users of ClickHouse 18.16 to add to a
// query that filters a view: newer releases push filters into views by
// default.
const pushDown = "\nSETTINGS enable_optimize_predicate_expression = 1"

// queries returns the README's and the query shapes, then the
// dashboard's read panels as the plugin sends them with All projects
// selected, over the whole history. The old form of each reads release
// 0.1.0's views.
func (b *bencher) queries() ([]query, error) {
	from := "toDate('2026-03-01')"
	last := fmt.Sprintf("toDateTime('2026-03-01 00:00:00') + %d", (b.o.days-1)*86400)
	qs := []query{
		{name: "project_read_daily: one project, 30 days",
			new: "SELECT * FROM project_read_daily WHERE project_id = 7 AND day >= " + from + " ORDER BY day"},
		{name: "project_read_daily: all projects, 30 days",
			new: "SELECT day, nft, reads, total, round(100 * read_rate, 2) AS read_rate_pct FROM project_read_daily WHERE day >= " + from + " ORDER BY nft, day"},
		{name: "message_read_latest: top 20 by reads",
			new: "SELECT nft, message_id, subject, read_count, total, percent, snapshot_at FROM message_read_latest ORDER BY read_count DESC LIMIT 20"},
		{name: "message_read_latest: one project",
			new: "SELECT * FROM message_read_latest WHERE project_id = 7 ORDER BY message_id"},
		{name: "project_read_snapshots: one project, 30 days",
			new: "SELECT * FROM project_read_snapshots WHERE project_id = 7 ORDER BY snapshot_at"},
		{name: "project_read_snapshots: all projects, last day",
			new: "SELECT nft, snapshot_at, reads, total, round(100 * read_rate, 2) AS read_rate_pct FROM project_read_snapshots WHERE snapshot_at >= " + last + " ORDER BY nft, snapshot_at"},
	}
	for i := range qs {
		qs[i].old = oldForm(qs[i].new)
		qs[i].new += pushDown
	}
	// Reads gained and the hourly views had no view before: users wrote
	// them by hand, if at all.
	for _, q := range []query{
		{name: "project_read_gains: one project, 30 days",
			new: "SELECT * FROM project_read_gains WHERE project_id = 7 ORDER BY snapshot_at"},
		{name: "project_read_gains: all projects, last day",
			new: "SELECT nft, snapshot_at, reads_gained, missed_ticks FROM project_read_gains WHERE snapshot_at >= " + last + " ORDER BY nft, snapshot_at"},
		{name: "project_read_daily_gains: one project, 30 days",
			new: "SELECT * FROM project_read_daily_gains WHERE project_id = 7 AND day >= " + from + " ORDER BY day"},
		{name: "project_read_daily_gains: all projects, 30 days",
			new: "SELECT day, nft, reads_gained, new_messages, missed_ticks FROM project_read_daily_gains WHERE day >= " + from + " ORDER BY nft, day"},
		{name: "project_read_hourly: one project, 30 days",
			new: "SELECT * FROM project_read_hourly WHERE project_id = 7 ORDER BY hour"},
		{name: "project_read_hourly: all projects, last day",
			new: "SELECT nft, hour, reads, total, round(100 * read_rate, 2) AS read_rate_pct FROM project_read_hourly WHERE hour >= " + last + " ORDER BY nft, hour"},
		{name: "project_read_hourly_gains: all projects, last day",
			new: "SELECT nft, hour, reads_gained, new_messages FROM project_read_hourly_gains WHERE hour >= " + last + " ORDER BY nft, hour"},
		{name: "message_read_by_age: one message",
			new: "SELECT * FROM message_read_by_age WHERE project_id = 7 AND message_id = 7000000 ORDER BY age_hours"},
		{name: "message_read_by_age: one project",
			new: "SELECT message_id, age_hours, reads FROM message_read_by_age WHERE project_id = 7 ORDER BY message_id, age_hours"},
		{name: "project_read_by_age: one project",
			new: "SELECT * FROM project_read_by_age WHERE project_id = 7 ORDER BY age_hours"},
		{name: "message_read_speed: one project",
			new: "SELECT * FROM message_read_speed WHERE project_id = 7 ORDER BY half_after_hours_max"},
		{name: "message_read_speed: all projects, 20 fastest",
			new: "SELECT nft, message_id, subject, half_after_hours_min, half_after_hours_max FROM message_read_speed WHERE latest_reads > 0 ORDER BY half_after_hours_max, half_after_hours_min LIMIT 20"},
	} {
		q.new += pushDown
		qs = append(qs, q)
	}
	panels, err := b.panelQueries()
	if err != nil {
		return nil, err
	}
	for i := range panels {
		if !strings.Contains(panels[i].new, "_gains") && !strings.Contains(panels[i].new, "_by_age") && !strings.Contains(panels[i].new, "_speed") {
			panels[i].old = oldForm(strings.TrimSuffix(panels[i].new, pushDown))
		}
	}
	return append(qs, panels...), nil
}

// oldForm is q on 0.1.0's views, and on the README's FINAL
// query where it reads the per-snapshot view that release lacked.
func oldForm(q string) string {
	return strings.NewReplacer("project_read_daily", "old_project_read_daily", "message_read_latest", "old_message_read_latest",
		"FROM project_read_snapshots", "FROM ("+oldSnapshots+")").Replace(q)
}

// oldSnapshots is the README's query for read rate at each snapshot before
// the rollups, shaped as the view's columns.
const oldSnapshots = `SELECT snapshot_at, project_id, nft, project_name, messages, reads, total, if(total = 0, 0, reads / total) AS read_rate
FROM
(
    SELECT project_id, snapshot_at, count() AS messages, sum(read_count) AS reads, sum(total) AS total
    FROM message_read_snapshots FINAL
    GROUP BY project_id, snapshot_at
)
ANY LEFT JOIN (SELECT id AS project_id, nft, name AS project_name FROM projects FINAL) USING project_id`

// median runs q n times and returns the median wall time in milliseconds,
// reading every row, and the row count.
func (b *bencher) median(ctx context.Context, q string, n int) (float64, int, error) {
	var times []time.Duration
	rows := 0
	for range n {
		start := time.Now()
		r, err := b.inDB.Query(ctx, q)
		if err != nil {
			return 0, 0, err
		}
		rows = 0
		for r.Next() {
			rows++
		}
		err = r.Err()
		r.Close()
		if err != nil {
			return 0, 0, err
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	return float64(times[len(times)/2].Microseconds()) / 1000, rows, nil
}
