// Command benchrepair measures what readsync --repair writes to mend one
// project, as the "Every statement reads what its change needs" issue
// defines it: on a database that make bench-bi filled (72M snapshot rows
// by default, kept with -keep), it rebuilds the derived rows of one
// project, as --verify --repair does once a row of that project differs,
// and reports the wall time and the bytes the server wrote to its files
// (system.events' WriteBufferFromFileDescriptorWriteBytes): during the
// repair, and until the merges it started are done. Nothing else should
// use the server meanwhile.
//
// Usage (make bench-repair runs both):
//
//	go run ./scripts/benchbi -dsn DSN -database readsync_bench_repair -keep -runs 1 -old-runs 0
//	go run ./scripts/benchrepair -dsn DSN -database readsync_bench_repair [-project 1 -runs 3]
//
// It measures and asserts nothing: the exit code is 0 when every repair
// succeeded.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/scripts/internal/benchdb"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/verify"
)

type options struct {
	dsn, database string
	project       int64
	runs          int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("benchrepair", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "", "native DSN of the ClickHouse server (its database is ignored)")
	fs.StringVar(&o.database, "database", "readsync_bench_repair", "a database make bench-bi filled, migrated to this release")
	fs.Int64Var(&o.project, "project", 1, "the project repaired")
	fs.IntVar(&o.runs, "runs", 3, "repairs, one after the other")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.dsn == "" {
		fmt.Fprintln(stderr, "benchrepair: -dsn is required")
		return 2
	}
	if err := bench(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "benchrepair: %v\n", err)
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
	// A database kept from an earlier release's bench is brought to this
	// one's schema, as an upgrade would.
	ch, err := benchdb.OpenMigrated(ctx, o.dsn, o.database, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer ch.Close()
	var snapshots, projectRows, derived uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM `"+o.database+"`.message_read_snapshots").Scan(&snapshots); err != nil {
		return fmt.Errorf("count the snapshot rows (fill the database with make bench-bi first): %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM `"+o.database+"`.message_read_snapshots WHERE project_id = ?", o.project).Scan(&projectRows); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = ? AND table NOT IN ('message_read_snapshots', 'projects', 'messages')", o.database).Scan(&derived); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ClickHouse %s: %d snapshot rows, of which project %d's %d; the derived tables take %.1f MiB\n\n",
		version, snapshots, o.project, projectRows, float64(derived)/(1<<20))
	fmt.Fprintln(stdout, "| run | wall | written during the repair | written with the merges it started |")
	fmt.Fprintln(stdout, "|---|---|---|---|")
	// What --verify reports of a project whose day row went missing.
	rep := verify.Report{Views: []verify.ViewDiff{{View: schema.DailyView, MissingRows: 1, Projects: []int64{o.project}}}}
	for i := range o.runs {
		if err := benchdb.WaitForMerges(ctx, conn, o.database, nil); err != nil {
			return err
		}
		before, err := written(ctx, conn)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := ch.Repair(ctx, rep); err != nil {
			return err
		}
		wall := time.Since(start)
		during, err := written(ctx, conn)
		if err != nil {
			return err
		}
		if err := benchdb.WaitForMerges(ctx, conn, o.database, nil); err != nil {
			return err
		}
		after, err := written(ctx, conn)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %d | %s | %.1f MiB | %.1f MiB |\n", i+1, wall.Round(time.Millisecond),
			float64(during-before)/(1<<20), float64(after-before)/(1<<20))
	}
	return nil
}

// written reads the bytes the server has written to files since it
// started.
func written(ctx context.Context, conn driver.Conn) (uint64, error) {
	var n uint64
	err := conn.QueryRow(ctx, "SELECT sum(value) FROM system.events WHERE event = 'WriteBufferFromFileDescriptorWriteBytes'").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read the bytes written from system.events: %w", err)
	}
	return n, nil
}
