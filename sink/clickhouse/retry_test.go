package clickhouse_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// A user's defaults that would break exactly-once do not reach readsync's
// INSERTs, which set what they rely on themselves: with each such default
// (given in the DSN, which the server applies as it would a profile's,
// before the INSERT's own settings), a write whose first try fails in a
// materialized view is retried with the same rows, as the writer retries
// and the spool replays, then delivered once more, as when the answer to
// the retry was lost. After that every view equals its brute force, and
// the target of every materialized view holds each write once.
//
// The view that fails is the test's own, on message_read_snapshots: it
// throws while its flag table holds a row. 18.16 has no deduplication
// tokens: there a repeated INSERT is added again, by design (see package
// derived's TestViewsEqualBruteForceRedelivered).
func TestRetriedWriteLeavesEveryViewExact(t *testing.T) {
	sinktest.Require(t, sinktest.DedupTokens)
	// On 26.7.2.1 the first two break a view or a rollup unless the
	// INSERT sets its own value; that server honours the tokens whatever
	// insert_deduplicate says, and answered the INSERTs of this test
	// synchronously whatever async_insert said, but the documentation of
	// both gives them a say.
	for _, defaults := range []string{
		"deduplicate_blocks_in_dependent_materialized_views=0",
		"materialized_views_ignore_errors=1",
		"insert_deduplicate=0",
		"async_insert=1&wait_for_async_insert=0",
	} {
		t.Run(defaults, func(t *testing.T) {
			ctx := context.Background()
			db := sinktest.New(t)
			ch := historytest.OpenSink(t, withDSNSettings(t, db.DSN, defaults))
			if err := ch.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			flag := addFailingView(t, db)
			h := historytest.NewHistory(t, ch)
			day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			h.Pass(day.Add(4 * time.Hour))
			var b sink.Batch
			for p := int64(1); p <= historytest.Projects; p++ {
				f := h.Fetch(p, day.Add(8*time.Hour), h.NextVersion())
				b.Projects = append(b.Projects, f.Projects...)
				b.Messages = append(b.Messages, f.Messages...)
				b.Snapshots = append(b.Snapshots, f.Snapshots...)
			}
			b.Schedule = historytest.Schedule

			flag(true)
			if err := ch.Write(ctx, &b); err == nil {
				t.Fatal("a write whose materialized view failed succeeded")
			}
			flag(false)
			for try := range 2 {
				if err := ch.Write(ctx, &b); err != nil {
					t.Fatalf("write again (%d): %v", try+1, err)
				}
			}
			historytest.AssertVerified(t, ch, time.Time{})
			assertWritesOnce(t, db)
		})
	}
}

// withDSNSettings returns dsn with the query settings of query (a URL
// query such as "a=1&b=0") added.
func withDSNSettings(t *testing.T, dsn, query string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	add, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, vs := range add {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// addFailingView adds to db's message_read_snapshots a materialized view
// that throws while its flag table holds a row, into a table that, like
// the rollups, remembers the tokens of its last INSERTs. It returns how to
// raise and clear the flag. Its rows are the snapshot rows' keys.
func addFailingView(t *testing.T, db *sinktest.DB) (flag func(up bool)) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		"CREATE TABLE " + db.Table("failing_view_flag") + " (up UInt8) ENGINE = MergeTree ORDER BY up",
		"CREATE TABLE " + db.Table("failing_view_rows") + ` (project_id Int64, message_id Int64, snapshot_at DateTime, version UInt64)
ENGINE = MergeTree ORDER BY (project_id, message_id, snapshot_at, version) SETTINGS non_replicated_deduplication_window = 100`,
		// The condition is evaluated on the view's block, so the view
		// fails while the INSERT pushes its rows, after the table took
		// them.
		"CREATE MATERIALIZED VIEW " + db.Table("failing_view") + " TO " + db.Table("failing_view_rows") + `
AS SELECT project_id, message_id, snapshot_at, version FROM ` + db.Table("message_read_snapshots") + `
WHERE throwIf(1 IN (SELECT up FROM ` + db.Table("failing_view_flag") + `), 'the test view fails while its flag is up') = 0`,
	} {
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	return func(up bool) {
		t.Helper()
		q := "TRUNCATE TABLE " + db.Table("failing_view_flag")
		if up {
			q = "INSERT INTO " + db.Table("failing_view_flag") + " (up) VALUES (1)"
		}
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
}

// assertWritesOnce fails t unless the targets of the materialized views
// on message_read_snapshots that count rows hold each write once: the
// summing rollup's sums per write, and the failing view's rows, equal
// what the snapshot table holds.
func assertWritesOnce(t *testing.T, db *sinktest.DB) {
	t.Helper()
	for _, c := range []struct{ name, got, want string }{
		{"project_read_snapshot_rollup", fmt.Sprintf(
			"SELECT concat(toString(project_id), ' ', toString(snapshot_at), ' ', toString(version), ': ', toString(sum(write_messages))) AS r FROM %s GROUP BY project_id, snapshot_at, version ORDER BY r",
			db.Table("project_read_snapshot_rollup")), fmt.Sprintf(
			"SELECT concat(toString(project_id), ' ', toString(snapshot_at), ' ', toString(version), ': ', toString(count())) AS r FROM %s FINAL GROUP BY project_id, snapshot_at, version ORDER BY r",
			db.Table("message_read_snapshots"))},
		{"failing_view_rows", "SELECT toString(count()) FROM " + db.Table("failing_view_rows"),
			"SELECT toString(count()) FROM " + db.Table("message_read_snapshots") + " FINAL"},
	} {
		got, want := sinktest.Lines(t, db.Conn, c.got), sinktest.Lines(t, db.Conn, c.want)
		if len(want) == 0 {
			t.Fatalf("%s: nothing to compare; the fixture wrote no rows", c.name)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s holds a write more or less than once:\n%s", c.name, historytest.DiffLines(got, want))
		}
	}
}
