package verify

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// The steps of the brute force: each a set of projects whose rows in the
// window are at most about bruteStepRows, read, computed and compared at
// once, and then dropped. A group of projects with windows of their own
// (window.go) is cut into lists; every other project is in one of a
// sequence of ranges of ids that covers them all, so that what Verify
// holds between two steps is the ranges' bounds, not a set of the
// projects, however many there are.

// bruteStepRows bounds the snapshot rows one step of projects reads, and
// so the brute force's memory (the views' rows of the step, from both
// sides, and the names of its projects and messages) and the server's
// sort: at 200 000 rows, a few tens of MiB.
const bruteStepRows = 200_000

// step is a step of the brute force: the projects of a list, or every
// project with an id from lo to hi but those of the lists.
type step struct {
	// projects, when set, is the list, sorted; lo and hi are its first
	// and last.
	projects []int64
	lo, hi   int64
	// except are, of a range, the projects of the lists within it,
	// sorted: their windows start earlier, and their own steps read them.
	except []int64
}

// filter returns the condition that selects the step's projects by the
// column col, and the external tables it reads. The range comes first:
// 18.16 narrows a read by it, and by an IN of an external table only on
// one server.
func (s step) filter(n chconn.Names, col string) (string, []*chconn.ExtTable, error) {
	cond := fmt.Sprintf("%s BETWEEN %d AND %d", col, s.lo, s.hi)
	in := func(table string) string {
		return strings.Replace(n.InExt("project_id", table), "project_id", col, 1)
	}
	switch {
	case s.projects != nil:
		pt, err := chconn.ProjectsExt("verified", s.projects)
		if err != nil {
			return "", nil, err
		}
		return cond + " AND " + in("verified"), []*chconn.ExtTable{pt}, nil
	case len(s.except) > 0:
		et, err := chconn.ProjectsExt("excepted", s.except)
		if err != nil {
			return "", nil, err
		}
		return cond + " AND NOT " + in("excepted"), []*chconn.ExtTable{et}, nil
	}
	return cond, nil, nil
}

// steps returns the steps of the group g of the window w: its projects'
// rows counted from the group's start, cut into steps of about
// bruteStepRows rows (a project's rows at least). The ranges of the
// group of every other project cover every id, those of projects without
// a row in the window too, so that their rows in the views, which have
// no brute force, are compared as extra.
func (c *Checker) steps(ctx context.Context, g windowGroup, w verifyWindow) ([]step, error) {
	table := c.names.Table(schema.SnapshotsTable.Name())
	if !g.all {
		pt, err := chconn.ProjectsExt("counted", g.projects)
		if err != nil {
			return nil, err
		}
		counts, err := chconn.QueryMap[int64, uint64](chconn.WithExternal(ctx, pt), c.conn, fmt.Sprintf(
			"SELECT project_id, count() FROM %s WHERE project_id BETWEEN %d AND %d AND %s AND snapshot_at >= %s GROUP BY project_id",
			table, g.projects[0], g.projects[len(g.projects)-1], c.names.InExt("project_id", "counted"), chconn.DateTime(g.start)))
		if err != nil {
			return nil, fmt.Errorf("count the snapshot rows from %s of %d projects with snapshots written since %s: %w", sink.Time(g.start), len(g.projects), sink.Time(w.from), err)
		}
		var out []step
		var cur []int64
		var n uint64
		for _, p := range g.projects {
			if len(cur) > 0 && n+counts[p] > c.stepRows {
				out = append(out, step{projects: cur, lo: cur[0], hi: cur[len(cur)-1]})
				cur, n = nil, 0
			}
			cur, n = append(cur, p), n+counts[p]
		}
		if len(cur) > 0 {
			out = append(out, step{projects: cur, lo: cur[0], hi: cur[len(cur)-1]})
		}
		return out, nil
	}
	// The counts stream in the order of the ids; only the bounds of the
	// ranges are kept.
	var (
		out   []step
		lo    int64 = math.MinInt64
		last  int64
		n     uint64
		begun bool
	)
	q := fmt.Sprintf("SELECT project_id, count() FROM %s WHERE snapshot_at >= %s GROUP BY project_id ORDER BY project_id", table, chconn.DateTime(g.start))
	err := chconn.QueryEach(ctx, c.conn, q, func(rows driver.Rows) error {
		var (
			p     int64
			count uint64
		)
		if err := rows.Scan(&p, &count); err != nil {
			return err
		}
		if _, own := w.early[p]; own {
			return nil
		}
		if begun && n+count > c.stepRows {
			out = append(out, step{lo: lo, hi: last})
			lo, n = last+1, 0
		}
		begun, last, n = true, p, n+count
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count the snapshot rows per project from %s: %w", sink.Time(g.start), err)
	}
	out = append(out, step{lo: lo, hi: math.MaxInt64})
	for i := range out {
		for p := range w.early {
			if p >= out[i].lo && p <= out[i].hi {
				out[i].except = append(out[i].except, p)
			}
		}
		slices.Sort(out[i].except)
	}
	return out, nil
}
