package derived

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// The day rollup's rows are computed by package schema's DayRefresh, whose
// comment says how a refresh's key lets refreshes land in any order; here
// is when they run: after every write, for the days it wrote.

// refreshDays recomputes the day rollup for days.
func (h *History) refreshDays(ctx context.Context, days map[chconn.ProjectDay]bool) error {
	if len(days) == 0 {
		return nil
	}
	projects, lo, hi := daySpan(days)
	pt, err := chconn.ProjectsExt("day_projects", projects)
	if err != nil {
		return err
	}
	dt, err := chconn.DaysExt("days", days)
	if err != nil {
		return err
	}
	// The projects and the span of days let the daily rollup's primary
	// key (project, day) and its partitions narrow the read; the pairs
	// make it exact.
	where := fmt.Sprintf("WHERE %s AND day >= %s AND day <= %s AND %s", chconn.InExt("project_id", "day_projects"),
		chconn.QuoteDate(sink.Time(lo*86400).Time()), chconn.QuoteDate(sink.Time(hi*86400).Time()), chconn.InExt("project_id, day", "days"))
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), pt, dt), schema.DayRefresh(h.names, where)); err != nil {
		return h.conn.Redact(fmt.Errorf("refresh %d project days of %s: %w", len(days), schema.DayRollup, err))
	}
	return nil
}

// daySpan returns the projects of days, sorted, and their first and last
// day: what narrows a read of a rollup keyed by project and time to the
// parts that can hold days.
func daySpan(days map[chconn.ProjectDay]bool) (projects []int64, lo, hi uint32) {
	seen := map[int64]bool{}
	lo = ^uint32(0)
	for pd := range days {
		seen[pd.Project] = true
		lo, hi = min(lo, pd.Day), max(hi, pd.Day)
	}
	return slices.Sorted(maps.Keys(seen)), lo, hi
}
