// Command benchverify measures readsync --verify against the number of
// names, as the "Every statement reads what its change needs" issue
// defines it: a scratch database of the first release's schema is filled
// by hand with many projects (a name each) and their messages'
// snapshots, a day apart up to now, then migrated, which folds that
// history into every rollup; then the readsync binary runs --verify over
// the whole history and --verify --since over the last days, and the
// bench prints each one's wall time, peak RSS and the rows the server
// read for it (the growth of SelectedRows in system.events, so nothing
// else should use the server meanwhile).
//
// Usage (make bench-verify runs it):
//
//	go run ./scripts/benchverify -dsn clickhouse://default:@127.0.0.1:19300/default -bin bin/readsync
//	    [-names 1000000 -messages 3 -snapshots 10 -since 48h]
//
// It measures and asserts nothing: the exit code is 0 when every run
// succeeded and found the views equal to their brute force.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/scripts/internal/benchdb"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/schema/migrate"
)

type options struct {
	dsn, database, bin string
	names, messages    int
	snapshots          int
	since              time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("benchverify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "", "native DSN of the ClickHouse server (its database is ignored)")
	fs.StringVar(&o.database, "database", "readsync_bench_verify", "scratch database, dropped and created again")
	fs.StringVar(&o.bin, "bin", "bin/readsync", "the readsync binary whose --verify is measured")
	fs.IntVar(&o.names, "names", 1_000_000, "projects, a name each")
	fs.IntVar(&o.messages, "messages", 3, "messages per project")
	fs.IntVar(&o.snapshots, "snapshots", 10, "snapshots of each message, a day apart up to now")
	fs.DurationVar(&o.since, "since", 48*time.Hour, "the window of the second run, --verify --since")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.dsn == "" {
		fmt.Fprintln(stderr, "benchverify: -dsn is required")
		return 2
	}
	if err := bench(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "benchverify: %v\n", err)
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
	version, err := benchdb.Version(ctx, conn)
	if err != nil {
		return err
	}
	if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS `"+o.database+"`"); err != nil {
		return err
	}
	dsn, err := benchdb.DatabaseDSN(o.dsn, o.database)
	if err != nil {
		return err
	}
	d, err := chconn.ParseDSN(dsn)
	if err != nil {
		return err
	}
	sc, err := chconn.Open(d, chconn.Topology{}, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer sc.Close()
	if err := migrate.ApplyFirst(ctx, sc, derived.FoldGains, 1); err != nil {
		return fmt.Errorf("create the first release's schema: %w", err)
	}
	start := time.Now()
	if err := fill(ctx, conn, o); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "benchverify: filled in %s; migrating, which folds the history into the rollups …\n", time.Since(start).Round(time.Second))
	start = time.Now()
	// By the binary: the folds of a large history take memory, and a
	// child forked from a large bench reports the bench's size as its
	// peak.
	if _, _, _, err := runBinary(ctx, o, conn, dsn, []string{"--migrate"}, stderr); err != nil {
		return err
	}
	if err := benchdb.WaitForMerges(ctx, conn, o.database, nil); err != nil {
		return err
	}
	rows := o.names * o.messages * o.snapshots
	fmt.Fprintf(stdout, "ClickHouse %s: %d names, %d messages each, %d snapshots a day apart: %d snapshot rows; migrated in %s\n\n",
		version, o.names, o.messages, o.snapshots, rows, time.Since(start).Round(time.Second))
	fmt.Fprintln(stdout, "| run | wall | peak RSS | rows read |")
	fmt.Fprintln(stdout, "|---|---|---|---|")
	for _, args := range [][]string{{"--verify"}, {"--verify", "--since", o.since.String()}} {
		wall, rss, read, err := runBinary(ctx, o, conn, dsn, args, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| readsync %s | %s | %.0f MiB | %d |\n", joinArgs(args), wall.Round(100*time.Millisecond), float64(rss)/1024, read)
	}
	return nil
}

// fill inserts, in the first release's tables, the projects, their
// messages, their snapshots a day apart up to the current day, and the
// ticks of a daily schedule.
func fill(ctx context.Context, conn driver.Conn, o options) error {
	db := "`" + o.database + "`"
	last := time.Now().UTC().Truncate(24 * time.Hour).Unix()
	first := last - int64(o.snapshots-1)*86400
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s.projects (id, nft, name, raw, fetched_at, version)
SELECT number, concat('name-', toString(number), '.eth'), concat('Project ', toString(number)), '{}', toDateTime(%d), 1 FROM numbers(%d)`, db, last, o.names),
		fmt.Sprintf(`INSERT INTO %s.messages (project_id, id, subject, fetched_at, version)
SELECT intDiv(number, %d), number, concat('Message ', toString(number)), toDateTime(%d), 1 FROM numbers(%d)`, db, o.messages, last, o.names*o.messages),
		fmt.Sprintf(`INSERT INTO %s.message_read_snapshots (project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version)
SELECT intDiv(m, %d) AS p, m, toDateTime(%d + 86400 * s) AS at, s * 10 + m %% 7 AS reads, 1000, round(reads / 10, 2), at, toUInt64(at) * 1000000000 + p
FROM (SELECT number %% %d AS m, intDiv(number, %d) AS s FROM numbers(%d))`, db, o.messages, first, o.names*o.messages, o.names*o.messages, o.names*o.messages*o.snapshots),
		fmt.Sprintf(`INSERT INTO %s.sync_runs (run_id, schedule, trigger, snapshot_at, started_at, finished_at, status)
SELECT concat('day-', toString(number)), 'daily', 'cron', toDateTime(%d + 86400 * number), toDateTime(%d + 86400 * number), toDateTime(%d + 86400 * number), 'ok' FROM numbers(%d)`,
			db, first, first, first, o.snapshots),
	} {
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("fill the history: %w", err)
		}
	}
	return nil
}

// runBinary runs the binary with args and returns its wall time, its peak
// RSS in KiB and the rows the server read meanwhile.
func runBinary(ctx context.Context, o options, conn driver.Conn, dsn string, args []string, stderr io.Writer) (time.Duration, int64, uint64, error) {
	dir, err := os.MkdirTemp("", "bench-verify")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	schedules := filepath.Join(dir, "schedules.yaml")
	if err := os.WriteFile(schedules, []byte("schedules:\n  - name: daily\n    cron: \"@daily\"\n    nft_names: [name-0.eth]\n"), 0o644); err != nil {
		return 0, 0, 0, err
	}
	meter, err := benchdb.StartReads(ctx, conn, o.database)
	if err != nil {
		return 0, 0, 0, err
	}
	logged, err := benchdb.LoggedDSN(dsn)
	if err != nil {
		return 0, 0, 0, err
	}
	cmd := exec.CommandContext(ctx, o.bin, args...)
	cmd.Env = []string{
		// Logged, for a server that counts no SelectedRows.
		"READSYNC_CLICKHOUSE_DSN=" + logged,
		"READSYNC_SPOOL_DIR=" + filepath.Join(dir, "spool"),
		"READSYNC_SCHEDULES_FILE=" + schedules,
		// Not reached: --verify reads only ClickHouse.
		"READSYNC_API_BASE_URL=http://127.0.0.1:9",
		"READSYNC_CLIENT_ID=bench",
		"READSYNC_CLIENT_SECRET=bench",
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	fmt.Fprintf(stderr, "benchverify: %s %s …\n", o.bin, joinArgs(args))
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s %s: %w\n%s", o.bin, joinArgs(args), err, out.String())
	}
	read, err := meter.Rows(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss
	}
	return wall, rss, read, nil
}

func joinArgs(args []string) string {
	var b bytes.Buffer
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a)
	}
	return b.String()
}
