// Command benchbytes measures what a snapshot row of message_read_snapshots
// takes on disk, by column, in a scratch database migrated with
// readsync's own migrations (so with the codecs of migration 13 where the
// server has them): one-minute snapshots of many messages, generated on
// the server, merged into one part per partition (OPTIMIZE … FINAL), then
// the compressed bytes of each column over the rows.
//
// Usage (make bench-bytes runs it):
//
//	go run ./scripts/benchbytes -dsn clickhouse://default:@127.0.0.1:19000/default
//	    [-projects 400 -messages 50 -minutes 500 -shape bursty]
//
// Shapes: bursty, where a message gains reads in 5% of its minutes (1 to
// 50 of them) and its count is otherwise the same as a minute before, the
// way a message's reads come after it is sent and when it is shared; and
// steady, where it gains 0 to 5 every minute and, in 2% of them, a jump
// of up to 300, which changes read_count and percent at nearly every row;
// and uniform, where it gains a random 0 to 3 every minute.
// A total changes in 0.2% of minutes. percent is the count over the total
// in hundredths, as the API sends it. It measures and asserts nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/scripts/internal/benchdb"
)

type options struct {
	dsn, database, shape        string
	projects, messages, minutes int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("benchbytes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "", "native DSN of the ClickHouse server (its database is ignored)")
	fs.StringVar(&o.database, "database", "readsync_bench_bytes", "scratch database, dropped and created again")
	fs.StringVar(&o.shape, "shape", "bursty", "how counts grow: bursty, steady or uniform")
	fs.IntVar(&o.projects, "projects", 400, "projects")
	fs.IntVar(&o.messages, "messages", 50, "messages per project")
	fs.IntVar(&o.minutes, "minutes", 500, "one-minute snapshots")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	increment, ok := shapes[o.shape]
	if o.dsn == "" || !ok {
		fmt.Fprintln(stderr, "benchbytes: -dsn is required, and -shape is bursty, steady or uniform")
		return 2
	}
	if err := bench(ctx, o, increment, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "benchbytes: %v\n", err)
		return 1
	}
	return 0
}

// shapes are the reads a message gains at minute i, by shape, as an
// expression of its key k.
var shapes = map[string]string{
	"bursty":  "if(cityHash64(k, i, 'b') % 100 < 5, 1 + cityHash64(k, i, 'n') % 50, 0)",
	"steady":  "if(cityHash64(k, i, 'j') % 100 < 2, cityHash64(k, i, 'J') % 300, cityHash64(k, i, 'i') % 6)",
	"uniform": "cityHash64(k, i, 'u') % 4",
}

// generate is the INSERT of the snapshot rows: message k of project
// intDiv(k, messages), at minute s.
const generate = `INSERT INTO %[1]s.message_read_snapshots (project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version, schedule)
SELECT
    toInt64(1000 + p),
    toInt64(msg_id),
    toDateTime('2026-03-02 00:00:00') + s * 60 AS at,
    toUInt64(least(r0 + rc[s + 1], tt[s + 1])) AS reads,
    toUInt64(tt[s + 1]) AS tot,
    round(reads * 100 / tot, 2),
    at + 2 + (cityHash64(p, s, 'f') %% 8) AS fetched,
    toUInt64(toUnixTimestamp(fetched)) * 1000000000 + cityHash64(p, s, 'v') %% 1000000000,
    'every-minute'
FROM
(
    SELECT
        k, intDiv(k, %[2]d) AS p,
        500000000 + cityHash64(k, 'id') %% 100000000 AS msg_id,
        toUInt64(exp(log(1000) + (cityHash64(k, 't') %% 10000) / 10000 * (log(50000) - log(1000)))) AS t0,
        cityHash64(k, 'r0') %% intDiv(t0, 10) AS r0,
        arrayCumSum(arrayMap(i -> %[3]s, range(%[4]d))) AS rc,
        arrayMap(x -> t0 + x, arrayCumSum(arrayMap(i -> if(cityHash64(k, i, 'tc') %% 1000 < 2, cityHash64(k, i, 'td') %% 100 + 1, 0), range(%[4]d)))) AS tt
    FROM (SELECT number + %[6]d AS k FROM system.numbers LIMIT %[5]d)
)
ARRAY JOIN range(%[4]d) AS s`

func bench(ctx context.Context, o options, increment string, stdout, stderr io.Writer) error {
	scratch, err := benchdb.OpenScratch(ctx, o.dsn, o.database, stderr)
	if err != nil {
		return err
	}
	defer scratch.Close()
	conn, version := scratch.Conn, scratch.Version
	start := time.Now()
	// The materialized views of the rollups are left out of the
	// measure's time, not of the INSERT: they take what readsync's own
	// writes give them.
	// Ten projects at a time: 18.16 sizes the arrays of a whole INSERT
	// at once.
	for p := 0; p < o.projects; p += 10 {
		n := min(10, o.projects-p) * o.messages
		q := fmt.Sprintf(generate, "`"+o.database+"`", o.messages, increment, o.minutes, n, p*o.messages)
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("generate the rows of projects %d to %d: %w", p, p+n/o.messages-1, err)
		}
	}
	inserted := time.Since(start)
	start = time.Now()
	// Merged into one part a partition: 18.16 may answer OPTIMIZE before
	// it merges, or not merge while a merge runs, so it is asked again
	// until the parts are merged.
	for {
		var parts, partitions uint64
		if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(partition_id) FROM system.parts WHERE active AND database = ? AND table = 'message_read_snapshots'",
			o.database).Scan(&parts, &partitions); err != nil {
			return err
		}
		if parts == partitions {
			break
		}
		if err := conn.Exec(ctx, "OPTIMIZE TABLE `"+o.database+"`.message_read_snapshots PARTITION ID '202603' FINAL"); err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("merge: %d parts left after %s", parts, time.Since(start).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	merged := time.Since(start)
	var rows, parts, compressed, onDisk uint64
	if err := conn.QueryRow(ctx, "SELECT sum(rows), count(), sum(data_compressed_bytes), sum(bytes_on_disk) FROM system.parts WHERE active AND database = ? AND table = 'message_read_snapshots'",
		o.database).Scan(&rows, &parts, &compressed, &onDisk); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ClickHouse %s, shape %s: %d rows (%d projects × %d messages × %d minutes) in %d parts; inserted in %s, merged in %s\n\n",
		version, o.shape, rows, o.projects, o.messages, o.minutes, parts, inserted.Round(time.Millisecond), merged.Round(time.Millisecond))
	fmt.Fprintln(stdout, "| column | codec | bytes a row |")
	fmt.Fprintln(stdout, "|---|---|---|")
	r, err := conn.Query(ctx, "SELECT name, compression_codec, data_compressed_bytes FROM system.columns WHERE database = ? AND table = 'message_read_snapshots' ORDER BY position", o.database)
	if err != nil {
		// 18.16 has no compression_codec column.
		r, err = conn.Query(ctx, "SELECT name, '', data_compressed_bytes FROM system.columns WHERE database = ? AND table = 'message_read_snapshots'", o.database)
		if err != nil {
			return err
		}
	}
	defer r.Close()
	for r.Next() {
		var name, codec string
		var b uint64
		if err := r.Scan(&name, &codec, &b); err != nil {
			return err
		}
		if codec == "" {
			codec = "server default"
		}
		fmt.Fprintf(stdout, "| %s | %s | %.3f |\n", name, codec, float64(b)/float64(rows))
	}
	if err := r.Err(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "| **the row** (compressed, on disk) | | **%.3f**, %.3f |\n", float64(compressed)/float64(rows), float64(onDisk)/float64(rows))
	return rollupBytes(ctx, conn, o.database, rows, stdout)
}

// rollupBytes writes what the tables the snapshots' materialized views
// fill take, merged, per snapshot row.
func rollupBytes(ctx context.Context, conn driver.Conn, database string, snapshots uint64, stdout io.Writer) error {
	tables := []string{"message_read_latest_rollup", "message_read_first_rollup", "message_read_daily_rollup", "message_read_hourly_rollup",
		"project_read_snapshot_rollup", "snapshot_changes"}
	fmt.Fprintln(stdout, "\n| table | rows | bytes a snapshot row |")
	fmt.Fprintln(stdout, "|---|---|---|")
	for _, t := range tables {
		rows, compressed, err := benchdb.MergedSize(ctx, conn, database, t)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %s | %d | %.3f |\n", t, rows, float64(compressed)/float64(snapshots))
	}
	return nil
}
