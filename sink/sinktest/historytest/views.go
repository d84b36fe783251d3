package historytest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink/sinktest"
)

// AllViews are the views that AssertViewsEqualBruteForce can compare.
var AllViews = []string{"message_read_latest", "project_read_daily", "project_read_snapshots"}

// CreateBruteForceViews creates 0.1.0's views under the names
// brute_<view>, and the brute force of the per-snapshot view: the rows of
// each project's newest write at each snapshot, deduplicated.
func CreateBruteForceViews(t *testing.T, db *sinktest.DB) {
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

// AssertViewsEqualBruteForce compares every view with its brute force
// (CreateBruteForceViews), whole and filtered to one project with the
// filter pushed down, as the docs/dashboards.md tells 18.16 users to
// query, and without.
func AssertViewsEqualBruteForce(t *testing.T, db *sinktest.DB, project int64, views ...string) {
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
				t.Errorf("%s %s (push down %v) differs from the brute force:\n%s", view, filter.where, filter.pushDown, DiffLines(got, want))
			}
		}
	}
}

// DiffLines describes how the lines got differ from want, for a failure
// message: each line of want missing from got, each line of got that
// want lacks, and both counts.
func DiffLines(got, want []string) string {
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
