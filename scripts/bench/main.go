// Command bench measures readsync at scale, as the "readsync at scale" issue
// defines it. For each workload it serves generated projects from
// bin/fakeupstream with a fixed latency, runs one `bin/readsync --backfill`
// into a dedicated ClickHouse database (dropped first) as a child process,
// and prints one table: wall time and its ratio to the ideal, CPU seconds and
// peak RSS of the readsync process alone, rows per second, snapshots written
// and INSERT queries, with the targets beneath.
//
// Usage (make bench runs it with the BENCH_* variables):
//
//	go run ./scripts/bench -dsn clickhouse://default:@127.0.0.1:19000/default
//	    [-names 2000 -messages 20 -latency 20ms -concurrency 16 -big-messages 300000]
//
// The exit code is 0 when every run completed and wrote every snapshot, even
// if a target was missed: the numbers are for reading, not asserting. It is 1
// when a run failed or lost rows, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the parsed command-line flags.
type options struct {
	dsn         string
	database    string
	bin         string
	work        string
	names       int
	messages    int
	bigMessages int
	latency     time.Duration
	concurrency int
	batchRows   int
	seed        int64
	timeout     time.Duration
	// nameSizes are the name counts of the name-scale workloads (names.go).
	nameSizes []int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	ch, err := openClickHouse(ctx, o.dsn)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	defer ch.Close()

	env, err := describeEnvironment(ctx, o, ch)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	var results []result
	for _, w := range o.workloads() {
		fmt.Fprintf(stderr, "bench: %s …\n", w.label)
		r, err := runWorkload(ctx, o, w, ch)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %s: %v\n", w.label, err)
			return 1
		}
		results = append(results, r)
	}
	if len(results) > 0 {
		printReport(stdout, o, env, results)
	}
	if len(o.nameSizes) > 0 {
		if err := runNameScale(ctx, o, ch, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
	}
	for _, r := range results {
		if !r.complete() {
			return 1
		}
	}
	return 0
}

// identifier is what the database name may be, so that it needs no quoting
// in the DSN or in SQL.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "", "native `DSN` of the ClickHouse server, as scripts/clickhouse.sh ensure prints it (required)")
	fs.StringVar(&o.database, "database", "readsync_bench", "`name` of the database readsync writes to; dropped before every run")
	fs.StringVar(&o.bin, "bin", "bin", "`directory` holding readsync and fakeupstream, as make build leaves them")
	fs.StringVar(&o.work, "work", ".tmp/bench", "`directory` for schedules, logs and the spool; emptied per workload")
	fs.IntVar(&o.names, "names", 2000, "names of the first workload (0 skips it)")
	fs.IntVar(&o.messages, "messages", 20, "messages per name of the first workload")
	fs.IntVar(&o.bigMessages, "big-messages", 300_000, "messages of the one-project workload (0 skips it)")
	fs.DurationVar(&o.latency, "latency", 20*time.Millisecond, "delay of every upstream response")
	fs.IntVar(&o.concurrency, "concurrency", 16, "READSYNC_CONCURRENCY")
	fs.IntVar(&o.batchRows, "batch-rows", 50_000, "READSYNC_BATCH_ROWS; also sets the INSERT target")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the generated data")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound on one readsync run")
	sizes := fs.String("name-sizes", "", "comma-separated name counts of the name-scale workloads (names.go), e.g. 10000,100000,1000000; empty skips them")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.nameSizes, err = parseSizes(*sizes); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case o.dsn == "":
		return o, errors.New("-dsn is required (make bench passes the one scripts/clickhouse.sh ensure prints)")
	case !identifier.MatchString(o.database):
		return o, fmt.Errorf("-database %q: must be letters, digits and underscores", o.database)
	case o.names < 0 || o.messages < 0 || o.bigMessages < 0:
		return o, fmt.Errorf("-names %d, -messages %d, -big-messages %d: must not be negative", o.names, o.messages, o.bigMessages)
	case o.names == 0 && o.bigMessages == 0 && len(o.nameSizes) == 0:
		return o, errors.New("-names, -big-messages and -name-sizes are all 0 or empty: nothing to measure")
	case o.latency < 0:
		return o, fmt.Errorf("-latency %v: must not be negative", o.latency)
	case o.concurrency < 1:
		return o, fmt.Errorf("-concurrency %d: must be at least 1", o.concurrency)
	case o.batchRows < 1:
		return o, fmt.Errorf("-batch-rows %d: must be at least 1", o.batchRows)
	case o.timeout <= 0:
		return o, fmt.Errorf("-timeout %v: must be positive", o.timeout)
	}
	return o, nil
}
