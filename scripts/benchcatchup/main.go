// Command benchcatchup measures how the reconcile drains a backlog, as the
// "Repairs that always finish" issue defines it. In a scratch database
// migrated by readsync, it writes one pass of projects × messages through
// readsync's sink, then inserts by hand, in one INSERT … SELECT, the
// requested count of earlier snapshots of those messages, a minute apart
// (what an import of another exporter's history, a long outage's replay or
// a backfill of past days leave). It then runs the readsync binary with
// --flush-spool and an empty spool, which reconciles everything that
// changed before it exits, and prints its wall time, the rows and project
// snapshots it caught up with per second, its steps, and the binary's peak
// RSS. Last, it writes passes back to back as a daemon on `@every 1m`
// would, and prints the changes each pass's reconcile read.
//
// Usage (make bench-catchup runs it):
//
//	go run ./scripts/benchcatchup -dsn clickhouse://default:@127.0.0.1:19000/default -bin bin/readsync
//	    [-projects 400 -messages 50 -rows 10000000 -passes 6]
//
// With -history, it does so once per depth of history in the list, each
// in a fresh database, and prints a table of what each depth costs: the
// catch-up's rate, a steady pass's wall time and the rows the server read
// for it and for its reconcile step, and readsync --verify's wall time and
// peak RSS over the whole history (make bench-history runs it).
//
// It measures and asserts nothing: the exit code is 0 when every step ran.
package main

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/scripts/internal/benchdb"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	chsink "github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/schema/resort"
	"github.com/readsync/readsync/sink/sinktest"
)

type options struct {
	dsn      string
	database string
	bin      string
	projects int
	messages int
	rows     int
	passes   int
	// history, when set, lists the snapshots a message of each run; rows
	// is then ignored.
	history []int
	// move, when set, starts from the snapshot table as releases up to
	// 0.5.0 sorted it, and times its move to the new sort key instead of
	// the catch-up and what follows.
	move bool
}

// result is what one run measured.
type result struct {
	release            string
	perMessage         int
	rows               uint64
	catchUp            time.Duration
	catchUpRSS         int64 // KiB
	steps, avgStepMS   uint64
	maxStepMS          uint64
	passMS             []int64
	passRead, stepRead []uint64
	verify             time.Duration
	verifyRSS          int64 // KiB
	// since is --verify --since two days before the last pass: its wall
	// time, peak RSS, and the rows the server read for it, beside what
	// the whole check read.
	since                 time.Duration
	sinceRSS              int64
	verifyRead, sinceRead uint64
	move                  time.Duration
	// statements are what the server read for each statement of the
	// last steady pass and of its reconcile steps, by text (the steps'
	// prefixed "step: "); written the rows the pass wrote.
	statements map[string]uint64
	written    uint64
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("benchcatchup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "clickhouse://default:@127.0.0.1:19000/default", "ClickHouse native DSN (its database is ignored)")
	fs.StringVar(&o.database, "database", "readsync_bench_catchup", "scratch database, dropped first")
	fs.StringVar(&o.bin, "bin", "bin/readsync", "the readsync binary whose catch-up is measured")
	fs.IntVar(&o.projects, "projects", 400, "projects")
	fs.IntVar(&o.messages, "messages", 50, "messages per project")
	fs.IntVar(&o.rows, "rows", 10_000_000, "earlier snapshot rows inserted by hand: the backlog")
	fs.IntVar(&o.passes, "passes", 6, "passes written after the catch-up, a minute apart in snapshot time")
	fs.BoolVar(&o.move, "move", false, "start from the snapshot table sorted as releases up to 0.5.0 did, and time its move to the new sort key (instead of the catch-up)")
	history := fs.String("history", "", "comma-separated snapshots a message, one run in a fresh database each (e.g. 10,1000,10000,30000)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	for _, f := range strings.Split(*history, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		var h int
		if _, err := fmt.Sscan(f, &h); err != nil || h < 1 {
			fmt.Fprintf(stderr, "bench-catchup: -history: %q is not a count of snapshots\n", f)
			return 2
		}
		o.history = append(o.history, h)
	}
	if len(o.history) == 0 {
		if _, err := bench(ctx, o, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "bench-catchup: %v\n", err)
			return 1
		}
		return 0
	}
	var results []result
	for _, h := range o.history {
		o.rows = h * o.projects * o.messages
		r, err := bench(ctx, o, stdout, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "bench-catchup: history of %d snapshots a message: %v\n", h, err)
			return 1
		}
		results = append(results, r)
	}
	printHistory(stdout, o, results)
	printStatements(stdout, results)
	return 0
}

// printHistory prints a row per depth of history.
func printHistory(w io.Writer, o options, rs []result) {
	fmt.Fprintf(w, "\nClickHouse %s, %d projects × %d messages; steady passes a minute apart after the catch-up (median of %d):\n\n", rs[0].release, o.projects, o.messages, o.passes)
	fmt.Fprintf(w, "| snapshots a message | stored rows | catch-up | rows/s | steps, avg / max ms | peak RSS | steady pass | rows read: pass | rows read: its step | --verify | its peak RSS | its rows read | --verify --since 48h | its rows read |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(w, "| %d | %d | %s | %.0f | %d, %d / %d | %.0f MiB | %d ms | %d | %d | %s | %.0f MiB | %d | %s | %d |\n",
			r.perMessage, r.rows+uint64(o.projects*o.messages), r.catchUp.Round(100*time.Millisecond), float64(r.rows)/r.catchUp.Seconds(),
			r.steps, r.avgStepMS, r.maxStepMS, float64(r.catchUpRSS)/1024, median(r.passMS), median(r.passRead), median(r.stepRead),
			r.verify.Round(100*time.Millisecond), float64(r.verifyRSS)/1024, r.verifyRead, r.since.Round(100*time.Millisecond), r.sinceRead)
	}
}

// nextSecond waits until the server's clock has passed the second it
// stands in.
func nextSecond(ctx context.Context, conn driver.Conn) error {
	now := func() (uint32, error) {
		var n uint32
		err := conn.QueryRow(ctx, "SELECT toUInt32(now())").Scan(&n)
		return n, err
	}
	start, err := now()
	for err == nil {
		var n uint32
		if n, err = now(); err == nil && n > start {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// printStatements prints what the server read for each statement of the
// last steady pass and its steps, a column per depth, with the pass's
// rows written and the reads a row written.
func printStatements(w io.Writer, rs []result) {
	texts := map[string]bool{}
	for _, r := range rs {
		for t := range r.statements {
			texts[t] = true
		}
	}
	fmt.Fprintf(w, "\nRows the server read for each statement of the last steady pass and its reconcile steps (its query log, or its progress where it keeps none):\n\n|")
	for _, r := range rs {
		fmt.Fprintf(w, " %d a message |", r.perMessage)
	}
	fmt.Fprintln(w, " statement |")
	fmt.Fprint(w, "|")
	for range rs {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w, "---|")
	keys := slices.Sorted(maps.Keys(texts))
	last := rs[len(rs)-1].statements
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(last[b], last[a]) })
	for _, t := range keys {
		fmt.Fprint(w, "|")
		for _, r := range rs {
			fmt.Fprintf(w, " %d |", r.statements[t])
		}
		text := t
		if len(text) > 120 {
			text = text[:120] + "…"
		}
		fmt.Fprintf(w, " `%s` |\n", strings.ReplaceAll(text, "|", "\\|"))
	}
	fmt.Fprint(w, "|")
	for _, r := range rs {
		var total uint64
		for _, n := range r.statements {
			total += n
		}
		fmt.Fprintf(w, " **%d** / %d = %.1f |", total, r.written, float64(total)/float64(max(r.written, 1)))
	}
	fmt.Fprintln(w, " **in all**: rows read / snapshot rows written |")
}

func median[T int64 | uint64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// bench is the whole measurement.
func bench(ctx context.Context, o options, stdout, stderr io.Writer) (result, error) {
	r := result{}
	conn, err := benchdb.Open(ctx, o.dsn, "")
	if err != nil {
		return r, err
	}
	defer conn.Close()
	if r.release, err = benchdb.Version(ctx, conn); err != nil {
		return r, err
	}
	if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS `"+o.database+"`"); err != nil {
		return r, fmt.Errorf("drop the scratch database: %w", err)
	}
	dsn, err := benchdb.DatabaseDSN(o.dsn, o.database)
	if err != nil {
		return r, err
	}
	d, err := chconn.ParseDSN(dsn)
	if err != nil {
		return r, err
	}
	if o.move {
		if err := createPreviousSnapshots(ctx, conn, o.database); err != nil {
			return r, err
		}
	}
	costs := sinktest.NewCosts()
	ch, err := chsink.OpenClickHouse(ctx, d, chsink.WithResort(resort.Options{Settle: time.Second}), chsink.WithIntercept(costs.Wrap))
	if err != nil {
		return r, err
	}
	defer ch.Close()
	if err := ch.Migrate(ctx); err != nil {
		return r, fmt.Errorf("migrate: %w", err)
	}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if err := writePass(ctx, ch, o, t0); err != nil {
		return r, err
	}
	if _, err := ch.Reconcile(ctx); err != nil {
		return r, fmt.Errorf("reconcile the first pass: %w", err)
	}
	r.perMessage = max(o.rows/(o.projects*o.messages), 1)
	fmt.Fprintf(stderr, "bench-catchup: inserting %d earlier snapshots of each of %d messages by hand …\n", r.perMessage, o.projects*o.messages)
	start := time.Now()
	if err := importHistory(ctx, conn, o.database, r.perMessage); err != nil {
		return r, err
	}
	fmt.Fprintf(stderr, "bench-catchup: inserted in %s\n", time.Since(start).Round(time.Millisecond))
	r.rows = uint64(r.perMessage * o.projects * o.messages)
	snapshots := uint64(r.perMessage * o.projects)
	if o.move {
		// The move copies the stored rows, whatever the derived ones.
		if r.move, err = move(ctx, ch); err != nil {
			return r, err
		}
		fmt.Fprintf(stdout, "ClickHouse %s: move of %d snapshot rows to the new sort key: %s, %.0f rows/s\n", r.release, r.rows+uint64(o.projects*o.messages),
			r.move.Round(100*time.Millisecond), float64(r.rows)/r.move.Seconds())
		return r, nil
	}
	// As a daemon finds it: settled, so that the steps record it all.
	time.Sleep(ch.ReconcileSettle() + 1100*time.Millisecond)

	if r.catchUp, r.catchUpRSS, err = runBinary(ctx, o, dsn, stderr, "--flush-spool"); err != nil {
		return r, err
	}
	q := "SELECT count(), sum(duration_ms), max(duration_ms) FROM `" + o.database + "`.reconciles WHERE changed_snapshots + changed_ticks > 0"
	var stepMS uint64
	if err := conn.QueryRow(ctx, q).Scan(&r.steps, &stepMS, &r.maxStepMS); err != nil {
		return r, fmt.Errorf("read the steps: %w", err)
	}
	r.avgStepMS = stepMS / max(r.steps, 1)
	fmt.Fprintf(stdout, "ClickHouse %s: a backlog of %d snapshot rows (%d project snapshots) inserted by hand beside %d projects × %d messages\n\n",
		r.release, r.rows, snapshots, o.projects, o.messages)
	fmt.Fprintf(stdout, "catch-up (readsync --flush-spool): %s, %.0f rows/s, %.0f project snapshots/s\n", r.catchUp.Round(100*time.Millisecond),
		float64(r.rows)/r.catchUp.Seconds(), float64(snapshots)/r.catchUp.Seconds())
	fmt.Fprintf(stdout, "steps recorded: %d, %d ms each on average, %d ms the longest\n", r.steps, r.avgStepMS, r.maxStepMS)
	fmt.Fprintf(stdout, "peak RSS of the binary: %.0f MiB\n\n", float64(r.catchUpRSS)/1024)
	if err := passes(ctx, ch, costs, conn, o, t0, stdout, &r); err != nil {
		return r, err
	}
	if len(o.history) > 0 {
		if r.verify, r.verifyRSS, r.verifyRead, err = verifyRun(ctx, o, conn, dsn, stderr, "--verify"); err != nil {
			return r, err
		}
		fmt.Fprintf(stdout, "readsync --verify over the whole history: %s, peak RSS %.0f MiB, %d rows read\n", r.verify.Round(100*time.Millisecond),
			float64(r.verifyRSS)/1024, r.verifyRead)
		// The history as if imported long before the window: the change
		// logs' rows of the import, which the window would otherwise
		// take whole (snapshots written since, taken before), are gone,
		// as when their month's partition is dropped.
		for _, table := range []string{"snapshot_changes", "tick_changes"} {
			if err := conn.Exec(ctx, "TRUNCATE TABLE `"+o.database+"`."+table); err != nil {
				return r, fmt.Errorf("empty %s: %w", table, err)
			}
		}
		since := t0.Add(time.Duration(o.passes)*time.Minute - 48*time.Hour).Format(time.RFC3339)
		if r.since, r.sinceRSS, r.sinceRead, err = verifyRun(ctx, o, conn, dsn, stderr, "--verify", "--since", since); err != nil {
			return r, err
		}
		fmt.Fprintf(stdout, "readsync --verify --since %s (two days before the last pass): %s, peak RSS %.0f MiB, %d rows read\n\n", since,
			r.since.Round(100*time.Millisecond), float64(r.sinceRSS)/1024, r.sinceRead)
	}
	return r, nil
}

// createPreviousSnapshots creates the snapshot table as releases up to
// 0.5.0 did, for the migrations to adopt.
func createPreviousSnapshots(ctx context.Context, conn driver.Conn, database string) error {
	for _, q := range []string{
		"CREATE DATABASE `" + database + "`",
		"CREATE TABLE `" + database + "`.message_read_snapshots (project_id Int64, message_id Int64, snapshot_at DateTime, read_count UInt64, " +
			"total UInt64, percent Float64, fetched_at DateTime, version UInt64, schedule String) ENGINE = ReplacingMergeTree(version) " +
			"PARTITION BY toYYYYMM(snapshot_at) ORDER BY (project_id, message_id, snapshot_at)",
	} {
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("create the previous release's snapshot table: %w", err)
		}
	}
	return nil
}

// move runs the move of the snapshot table to the new sort key to its
// end, as a daemon's background loop would, without the settle delay.
func move(ctx context.Context, ch *chsink.ClickHouse) (time.Duration, error) {
	start := time.Now()
	for {
		rep, err := ch.ResortStep(ctx)
		if err != nil {
			return 0, fmt.Errorf("move to the new sort key: %w", err)
		}
		if rep.Done {
			return time.Since(start), nil
		}
		time.Sleep(rep.Wait)
	}
}

// writePass writes one pass of every project at at through readsync's
// sink, which refreshes what it wrote.
func writePass(ctx context.Context, ch *chsink.ClickHouse, o options, at time.Time) error {
	ts, version := sink.TimeOf(at), uint64(at.UnixNano())
	b := &sink.Batch{Schedule: "bench"}
	for p := int64(1); p <= int64(o.projects); p++ {
		b.Projects = append(b.Projects, sink.Project{ID: p, NFT: fmt.Sprintf("p%d.dmail", p), CreateAt: ts, FetchedAt: ts, Version: version})
		for m := int64(0); m < int64(o.messages); m++ {
			reads := uint64(at.Unix()/60) % 1000
			b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: p*1_000_000 + m, SnapshotAt: ts, FetchedAt: ts,
				ReadCount: reads, Total: 1000, Percent: float64(reads) / 10, Version: version + uint64(p)})
		}
	}
	if err := ch.Write(ctx, b); err != nil {
		return fmt.Errorf("write a pass at %s: %w", at.Format(time.RFC3339), err)
	}
	return nil
}

// importHistory inserts perMessage earlier snapshots of every message of
// the first pass, a minute apart before it, in one INSERT … SELECT.
func importHistory(ctx context.Context, conn driver.Conn, database string, perMessage int) error {
	table := "`" + database + "`.message_read_snapshots"
	var cols []string
	rows, err := conn.Query(ctx, "SELECT name FROM system.columns WHERE database = ? AND table = 'message_read_snapshots'", database)
	if err != nil {
		return fmt.Errorf("read the columns: %w", err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return err
		}
		cols = append(cols, c)
	}
	rows.Close()
	exprs := make([]string, len(cols))
	for i, c := range cols {
		switch c {
		case "snapshot_at":
			exprs[i] = "toDateTime(toUInt32(snapshot_at) - (number + 1) * 60)"
		case "read_count":
			exprs[i] = "toUInt64(read_count * 1000 / (number + 1000))"
		default:
			exprs[i] = c
		}
	}
	q := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s ARRAY JOIN range(%d) AS number",
		table, strings.Join(cols, ", "), strings.Join(exprs, ", "), table, perMessage)
	if err := conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("insert the backlog: %w", err)
	}
	return nil
}

// verifyRun runs the binary with args, its statements logged, and returns
// its wall time, its peak RSS in KiB and the rows the server read for it.
func verifyRun(ctx context.Context, o options, conn driver.Conn, dsn string, stderr io.Writer, args ...string) (time.Duration, int64, uint64, error) {
	meter, err := benchdb.StartReads(ctx, conn, o.database)
	if err != nil {
		return 0, 0, 0, err
	}
	logged, err := benchdb.LoggedDSN(dsn)
	if err != nil {
		return 0, 0, 0, err
	}
	wall, rss, err := runBinary(ctx, o, logged, stderr, args...)
	if err != nil {
		return 0, 0, 0, err
	}
	read, err := meter.Rows(ctx)
	return wall, rss, read, err
}

// runBinary runs the binary with arg (--flush-spool with an empty spool,
// which reconciles everything that changed before it exits, or --verify)
// and returns its wall time and peak RSS in KiB.
func runBinary(ctx context.Context, o options, dsn string, stderr io.Writer, args ...string) (time.Duration, int64, error) {
	dir, err := os.MkdirTemp("", "bench-catchup")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	schedules := filepath.Join(dir, "schedules.yaml")
	if err := os.WriteFile(schedules, []byte("schedules:\n  - name: bench\n    cron: \"@every 1m\"\n    nft_names: [p1.dmail]\n"), 0o644); err != nil {
		return 0, 0, err
	}
	cmd := exec.CommandContext(ctx, o.bin, args...)
	arg := strings.Join(args, " ")
	cmd.Env = []string{
		"READSYNC_CLICKHOUSE_DSN=" + dsn,
		"READSYNC_SPOOL_DIR=" + filepath.Join(dir, "spool"),
		"READSYNC_SCHEDULES_FILE=" + schedules,
		// Not reached: the catch-up and the check read only ClickHouse.
		"READSYNC_API_BASE_URL=http://127.0.0.1:9",
		"READSYNC_CLIENT_ID=bench",
		"READSYNC_CLIENT_SECRET=bench",
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	fmt.Fprintf(stderr, "bench-catchup: %s %s …\n", o.bin, arg)
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("%s %s: %w\n%s", o.bin, arg, err, out.String())
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil {
		return wall, 0, nil
	}
	return wall, ru.Maxrss, nil
}

// passes writes o.passes passes a minute apart in snapshot time, as a
// daemon on `@every 1m` would, and after each runs the reconcile steps
// once the pass's changes have settled: it prints, and records in r, what
// each took and what the server read for it.
func passes(ctx context.Context, ch *chsink.ClickHouse, costs *sinktest.Costs, conn driver.Conn, o options, t0 time.Time, w io.Writer, r *result) error {
	if o.passes == 0 {
		return nil
	}
	fmt.Fprintf(w, "passes at @every 1m of %d projects, then the reconcile steps after each:\n", o.projects)
	fmt.Fprintf(w, "%6s %10s %14s %22s %12s %10s %14s\n", "pass", "pass ms", "rows read", "snapshot changes read", "refreshed", "steps ms", "rows read")
	for i := 1; i <= o.passes; i++ {
		costs.Take()
		pctx, reads := sink.CountReads(ctx)
		pstart := time.Now()
		if err := writePass(pctx, ch, o, t0.Add(time.Duration(i)*time.Minute)); err != nil {
			return err
		}
		passMS := time.Since(pstart).Milliseconds()
		passStmts := costs.Take()
		// The steps read a change once it is older than the settle delay.
		time.Sleep(ch.ReconcileSettle() + 1100*time.Millisecond)
		start := time.Now()
		var read, refreshed int
		var stepRows uint64
		for {
			rep, err := ch.ReconcileStep(ctx, "bench", derived.DefaultStepChanges)
			if err != nil {
				return fmt.Errorf("reconcile after pass %d: %w", i, err)
			}
			read += rep.ChangedSnapshots
			refreshed += rep.Refreshed
			stepRows += rep.ReadRows
			if rep.CaughtUp {
				break
			}
		}
		stepStmts := costs.Take()
		// The next pass comes a minute later at @every 1m: not in the
		// second a step recomputed something, which the next step would
		// take for a recomputation beside the pass's refresh.
		if err := nextSecond(ctx, conn); err != nil {
			return err
		}
		if err := costs.Fill(ctx, conn, append(slices.Clone(passStmts), stepStmts...)); err != nil {
			return err
		}
		r.statements = sinktest.ByText(passStmts)
		for text, n := range sinktest.ByText(stepStmts) {
			r.statements["step: "+text] += n
		}
		r.written = uint64(o.projects * o.messages)
		fmt.Fprintf(w, "%6d %10d %14d %22d %12d %10d %14d\n", i, passMS, sinktest.Total(passStmts), read, refreshed, time.Since(start).Milliseconds(), sinktest.Total(stepStmts))
		r.passMS = append(r.passMS, passMS)
		r.passRead = append(r.passRead, sinktest.Total(passStmts))
		r.stepRead = append(r.stepRead, sinktest.Total(stepStmts))
		_, _ = reads, stepRows
	}
	fmt.Fprintln(w)
	return nil
}
