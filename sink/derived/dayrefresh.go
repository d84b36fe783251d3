package derived

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// The day rollup's rows are computed by package schema's DayRefresh, whose
// comment says how a refresh's key lets refreshes land in any order; here
// is when they run: after every write, for the days it wrote.

// refreshDays recomputes the day rollup and the hour rollup for the days
// and hours of the snapshots of set.
func (h *History) refreshDays(ctx context.Context, set chconn.SnapshotSet) error {
	for _, p := range []chconn.Period{chconn.Day, chconn.Hour} {
		if err := h.refreshPeriods(ctx, p, set.Periods(p)); err != nil {
			return err
		}
	}
	return nil
}

// periodRollups are, by period, the rollup of a project's period that a
// refresh keeps and the INSERT that refreshes it.
func periodRollup(p chconn.Period) (rollup string, refresh func(chconn.Names, string) string) {
	if p == chconn.Day {
		return schema.DayRollup, schema.DayRefresh
	}
	return schema.HourRollup, schema.HourRefresh
}

// refreshPeriods recomputes the rollup of the project periods of p keys.
func (h *History) refreshPeriods(ctx context.Context, p chconn.Period, keys map[chconn.ProjectDay]bool) error {
	if len(keys) == 0 {
		return nil
	}
	projects, lo, hi := daySpan(keys)
	pt, err := chconn.ProjectsExt("day_projects", projects)
	if err != nil {
		return err
	}
	dt, err := chconn.PeriodsExt("days", p, keys)
	if err != nil {
		return err
	}
	// The projects and the span of periods let the rollup's primary key
	// (project, period) and its partitions narrow the read; the pairs
	// make it exact.
	col := p.Column()
	where := fmt.Sprintf("WHERE %s AND %s >= %s AND %s <= %s AND %s", h.names.InExt("project_id", "day_projects"),
		col, p.Literal(lo), col, p.Literal(hi), h.names.InExt("project_id, "+col, "days"))
	rollup, refresh := periodRollup(p)
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), pt, dt), refresh(h.names, where)); err != nil {
		return h.conn.Redact(fmt.Errorf("refresh %d project %ss of %s: %w", len(keys), col, rollup, err))
	}
	return nil
}

// daySpan returns the projects of days (or other periods), sorted, and
// their first and last: what narrows a read of a rollup keyed by project and time to the
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
