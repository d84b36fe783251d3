// Command benchhealth measures the view name_health, as the "Every name's
// health at a glance" issue defines it: a scratch database migrated with
// readsync's own migrations holds the outcomes of passes of many names,
// some failing at every pass, and the queries readsync and the dashboard
// send to the view are timed (the median of several runs), beside the
// bytes each outcome row takes on disk.
//
// Usage (make bench-health runs it):
//
//	go run ./scripts/benchhealth -dsn clickhouse://default:@127.0.0.1:19000/default
//	    [-names 100000 -failing 0.01 -passes 1440 -unmerged 10 -success-days 0 -runs 5]
//
// The passes are a minute apart and end now: the failing names' rows are
// those of every pass, a day of them at 1 440, which is what the view
// reads; the names read are written for the last -unmerged passes, the
// rows name_successes holds before its merges keep each name's latest.
// With -success-days, the names read are written once a day for that
// many days before too, as a history of successes stored, and merged
// before the passes are written, as the server's merges would have. Each query's
// time and the rows the server read for it (its progress) are reported.
// It measures and asserts nothing: the exit code is 0 when every query ran.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/scripts/internal/benchdb"
)

type options struct {
	dsn, database           string
	names, passes, unmerged int
	dailyPasses             int
	successDays             int
	failing                 float64
	runs                    int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("benchhealth", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "", "native DSN of the ClickHouse server (its database is ignored)")
	fs.StringVar(&o.database, "database", "readsync_bench_health", "scratch database, dropped and created again")
	fs.IntVar(&o.names, "names", 100_000, "names of the schedule")
	fs.Float64Var(&o.failing, "failing", 0.01, "share of the names that fail at every pass")
	fs.IntVar(&o.passes, "passes", 1440, "passes, a minute apart, ending now")
	fs.IntVar(&o.unmerged, "unmerged", 10, "last passes whose names read are written")
	fs.IntVar(&o.dailyPasses, "daily-passes", 64, "passes of a second, daily schedule, ending now, at which the same share of its names fails (0: none)")
	fs.IntVar(&o.successDays, "success-days", 0, "days before the passes for each of which the names read are written once more: successes stored")
	fs.IntVar(&o.runs, "runs", 5, "runs of each query; the median is reported")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.dsn == "" {
		fmt.Fprintln(stderr, "benchhealth: -dsn is required")
		return 2
	}
	if err := bench(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "benchhealth: %v\n", err)
		return 1
	}
	return 0
}

func bench(ctx context.Context, o options, stdout, stderr io.Writer) error {
	scratch, err := benchdb.OpenScratch(ctx, o.dsn, o.database, stderr)
	if err != nil {
		return err
	}
	defer scratch.Close()
	conn, version := scratch.Conn, scratch.Version
	every := int(1 / o.failing)
	now := time.Now().UTC().Truncate(time.Minute)
	start := time.Now()
	if o.successDays > 0 {
		q := fmt.Sprintf("INSERT INTO `%s`.name_successes (nft, snapshot_at, schedule) "+
			"SELECT concat('name-', toString(number %% %d), '.eth'), toDateTime(%d - 86400 * (1 + intDiv(number, %d))), 'every-minute' "+
			"FROM numbers(%d) WHERE (number %% %d) %% %d != 0",
			o.database, o.names, now.Unix()-int64(o.passes)*60, o.names, o.names*o.successDays, o.names, every)
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("write %d days of names read: %w", o.successDays, err)
		}
		// Days and months ago, the server's merges have long kept each
		// name's latest success of them: what the last passes add on top
		// is what is left unmerged.
		if err := conn.Exec(ctx, "OPTIMIZE TABLE `"+o.database+"`.name_successes FINAL"); err != nil {
			return fmt.Errorf("merge %d days of names read: %w", o.successDays, err)
		}
	}
	for p := range o.passes {
		at := now.Add(time.Duration(p-o.passes+1) * time.Minute).Unix()
		q := fmt.Sprintf("INSERT INTO `%s`.name_failures (run_id, snapshot_at, shard, nft, stage, kind, http_status, attempts, error, schedule) "+
			"SELECT 'run-%d', toDateTime(%d), '', concat('name-', toString(number), '.eth'), 'details', 'http_5xx', 502, 5, "+
			"concat('project details of nft \"name-', toString(number), '.eth\": after 5 attempts: HTTP 502 Bad Gateway'), 'every-minute' "+
			"FROM system.numbers WHERE number %% %d = 0 LIMIT %d", o.database, p, at, every, o.names/every)
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("write the failures of pass %d: %w", p, err)
		}
		if p < o.passes-o.unmerged {
			continue
		}
		q = fmt.Sprintf("INSERT INTO `%s`.name_successes (nft, snapshot_at, schedule) "+
			"SELECT concat('name-', toString(number), '.eth'), toDateTime(%d), 'every-minute' FROM system.numbers WHERE number %% %d != 0 LIMIT %d",
			o.database, at, every, o.names-o.names/every)
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("write the names read at pass %d: %w", p, err)
		}
	}
	// Each pass's record in sync_runs, from three pods, which name_health
	// reads the schedules' intervals from; and a daily schedule whose
	// failing names count over its last 64 passes, beyond the day.
	q := fmt.Sprintf("INSERT INTO `%s`.sync_runs (run_id, schedule, trigger, snapshot_at, started_at, finished_at, status, shard) "+
		"SELECT concat('run-', toString(number)), 'every-minute', 'cron', toDateTime(%d + 60 * intDiv(number, 3)), toDateTime(%d + 60 * intDiv(number, 3)), "+
		"toDateTime(%d + 60 * intDiv(number, 3)), 'ok', concat(toString(number %% 3), '/3') FROM numbers(%d)",
		o.database, now.Unix()-int64(o.passes-1)*60, now.Unix()-int64(o.passes-1)*60, now.Unix()-int64(o.passes-1)*60, 3*o.passes)
	if err := conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("write the passes' runs: %w", err)
	}
	for p := range o.dailyPasses {
		at := now.Add(time.Duration(p-o.dailyPasses+1) * 24 * time.Hour).Unix()
		q := fmt.Sprintf("INSERT INTO `%s`.name_failures (run_id, snapshot_at, shard, nft, stage, kind, http_status, attempts, error, schedule) "+
			"SELECT 'daily-%d', toDateTime(%d), '', concat('name-', toString(number), '.eth'), 'details', 'not_found', 404, 1, "+
			"concat('no project is bound to nft \"name-', toString(number), '.eth\"'), 'daily' "+
			"FROM system.numbers WHERE number %% %d = 0 LIMIT %d", o.database, p, at, every, o.names/every)
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("write the failures of daily pass %d: %w", p, err)
		}
		q = fmt.Sprintf("INSERT INTO `%s`.sync_runs (run_id, schedule, trigger, snapshot_at, started_at, finished_at, status, shard) "+
			"SELECT 'daily-%d', 'daily', 'cron', toDateTime(%d), toDateTime(%d), toDateTime(%d), 'ok', ''", o.database, p, at, at, at)
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("write the run of daily pass %d: %w", p, err)
		}
	}
	fmt.Fprintf(stdout, "ClickHouse %s: %d names, %d failing at each of %d passes a minute apart (%d failure rows), names read written at the last %d "+
		"and once a day for %d days before; a daily schedule with %d failing at each of %d passes; written in %s\n\n",
		version, o.names, o.names/every, o.passes, o.passes*(o.names/every), o.unmerged, o.successDays, o.names/every, o.dailyPasses, time.Since(start).Round(time.Second))
	// A daemon writes a pass a minute, and the server merges its parts as
	// they come: the queries are timed once the merges of the writes above
	// are done, not while they compete for the same cores.
	parts, err := settled(ctx, conn, o.database)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Parts once the merges settled: %s\n\n", parts)

	queries := []struct{ what, sql string }{
		{"the panel, All (failing names, most passes first)", "SELECT schedule, nft, failing_passes, last_error_kind, last_http_status, last_error, last_failure_at, last_success_at FROM `" + o.database + "`.name_health WHERE failing_passes > 0 ORDER BY failing_passes DESC, schedule, nft LIMIT 1000" + pushDown},
		{"the status page's first 100 (GET /status.json)", "SELECT schedule, nft, last_success_at, last_failure_at, last_error_kind, last_error, last_http_status, failures_24h, failing_passes FROM `" + o.database + "`.name_health WHERE failing_passes > 0 ORDER BY failing_passes DESC, schedule, nft LIMIT 100" + pushDown},
		{"the daemon's counts (readsync_names_*)", "SELECT schedule, count(), countIf(failing_passes >= 3), max(failing_passes) FROM `" + o.database + "`.name_health WHERE failing_passes > 0 GROUP BY schedule" + pushDown},
		{"one name", "SELECT * FROM `" + o.database + "`.name_health WHERE nft = 'name-100.eth'" + pushDown},
	}
	fmt.Fprintln(stdout, "| query | median | rows | rows read |")
	fmt.Fprintln(stdout, "|---|---|---|---|")
	for _, q := range queries {
		d, n, read, err := timed(ctx, conn, q.sql, o.runs)
		if err != nil {
			return fmt.Errorf("%s: %w", q.what, err)
		}
		fmt.Fprintf(stdout, "| %s | %s | %d | %d |\n", q.what, d.Round(100*time.Microsecond), n, read)
	}
	return bytesPerRow(ctx, conn, o.database, stdout)
}

// settled waits until the server runs no merge in the database, and
// returns the active parts of each table with more than one.
func settled(ctx context.Context, conn driver.Conn, db string) (string, error) {
	if err := benchdb.WaitForMerges(ctx, conn, db, nil); err != nil {
		return "", err
	}
	var parts string
	q := "SELECT arrayStringConcat(groupArray(concat(table, ' ', toString(n))), ', ') FROM (SELECT table, count() AS n FROM system.parts " +
		"WHERE active AND database = ? GROUP BY table HAVING n > 1 ORDER BY table)"
	if err := conn.QueryRow(ctx, q, db).Scan(&parts); err != nil {
		return "", fmt.Errorf("count the parts: %w", err)
	}
	return parts, nil
}

// pushDown is what the dashboard's panel and readsync's own queries of the
// view add, for 18.16.
const pushDown = " SETTINGS enable_optimize_predicate_expression = 1"

// timed runs q runs times and returns the median time, and the rows of
// the last run and the rows the server read for it.
func timed(ctx context.Context, conn driver.Conn, q string, runs int) (time.Duration, int, uint64, error) {
	var times []time.Duration
	n := 0
	var read uint64
	for range runs {
		read = 0
		qctx := clickhouse.Context(ctx, clickhouse.WithProgress(func(p *clickhouse.Progress) { read += p.Rows }))
		start := time.Now()
		rows, err := conn.Query(qctx, q)
		if err != nil {
			return 0, 0, 0, err
		}
		n = 0
		for rows.Next() {
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, 0, 0, err
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	return times[len(times)/2], n, read, nil
}

// bytesPerRow prints the compressed bytes a row of each outcome table
// takes once its parts are merged.
func bytesPerRow(ctx context.Context, conn driver.Conn, db string, stdout io.Writer) error {
	fmt.Fprintln(stdout, "\n| table | rows, merged | compressed bytes a row |")
	fmt.Fprintln(stdout, "|---|---|---|")
	for _, t := range []string{"name_failures", "name_successes", "name_failure_hour_rollup"} {
		rows, bytes, err := benchdb.MergedSize(ctx, conn, db, t)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %s | %d | %.2f |\n", t, rows, float64(bytes)/float64(max(rows, 1)))
	}
	return nil
}
