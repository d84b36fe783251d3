package verify

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// The window of a verification: what Verify compares when it is given a
// time. A snapshot's time says when it was taken, not when it was
// written: a backfill with --snapshot-at in the past, a spool replayed
// after days, an import of old history all write snapshots taken long
// before. A nightly check of the last two days must see those too, so the
// window holds, besides every snapshot and day from the window's day on,
// what the change logs (package schema's changes.go) record as written
// since then, whatever its time, and every view row that depends on it:
//
//   - of each project with a snapshot written since then but taken before,
//     every row from that snapshot's day on: the gains of its later
//     snapshots depend on the rows before them, the day values on the
//     day's rows, the latest rows on all of them;
//   - of each cron tick recorded since then but due before, its day's
//     schedule_coverage row, and every row from the day of the first
//     later snapshot of each project of that schedule, whose missed ticks
//     it may change.
//
// Both sides, the views and the brute force, are read by the same window.

// verifyWindow is a verification's window: every row from the UTC day
// from on, and of the projects in early, every row from their own earlier
// day on; of schedule_coverage, the days from from on and those in
// tickDays.
type verifyWindow struct {
	from uint32
	// early holds, for each project whose window starts before from, the
	// start of its window: the start of a UTC day.
	early map[int64]uint32
	// tickDays are the schedule days, before from, of the cron ticks
	// recorded since from.
	tickDays map[scheduleDay]bool
	// written and ticks count the project snapshots and the cron ticks
	// taken before from that the change logs record as written since.
	written, ticks int
	// edgeDay is the first UTC day whose raw rows are all kept, 0 when
	// none expired: nothing before it is in the window.
	edgeDay uint32
}

// scheduleDay is a schedule's UTC day, in days since the Unix epoch.
type scheduleDay struct {
	schedule string
	day      uint32
}

// readWindow reads the change logs for the window from the day start from
// on (the whole history for 0).
func (c *Checker) readWindow(ctx context.Context, from uint32) (verifyWindow, error) {
	w := verifyWindow{from: from, early: map[int64]uint32{}, tickDays: map[scheduleDay]bool{}}
	if c.edge > 0 {
		w.edgeDay = chconn.DayStart(c.edge + 86399)
	}
	if from == 0 {
		return w, nil
	}
	q := fmt.Sprintf("SELECT project_id, toUInt32(min(snapshot_at)), uniqExact(snapshot_at) FROM %s WHERE changed_at >= %s AND snapshot_at < %s GROUP BY project_id",
		c.names.Table(schema.SnapshotChanges), chconn.DateTime(from), chconn.DateTime(from))
	err := chconn.QueryEach(ctx, c.conn, q, func(rows driver.Rows) error {
		var (
			p     int64
			first uint32
			n     uint64
		)
		if err := rows.Scan(&p, &first, &n); err != nil {
			return err
		}
		w.lower(p, first)
		w.written += int(n)
		return nil
	})
	if err != nil {
		return w, fmt.Errorf("read the snapshots written since %s from %s: %w", sink.Time(from), schema.SnapshotChanges, err)
	}
	firstTicks := map[string]uint32{}
	q = fmt.Sprintf("SELECT DISTINCT schedule, toUInt32(tick) FROM %s WHERE changed_at >= %s AND tick < %s",
		c.names.Table(schema.TickChanges), chconn.DateTime(from), chconn.DateTime(from))
	err = chconn.QueryEach(ctx, c.conn, q, func(rows driver.Rows) error {
		var (
			s    string
			tick uint32
		)
		if err := rows.Scan(&s, &tick); err != nil {
			return err
		}
		if tick < w.edgeDay {
			return nil // the tick's day is taken as given
		}
		if first, ok := firstTicks[s]; !ok || tick < first {
			firstTicks[s] = tick
		}
		w.tickDays[scheduleDay{s, chconn.DayOf(tick)}] = true
		w.ticks++
		return nil
	})
	if err != nil {
		return w, fmt.Errorf("read the ticks recorded since %s from %s: %w", sink.Time(from), schema.TickChanges, err)
	}
	for _, s := range slices.Sorted(maps.Keys(firstTicks)) {
		if err := c.windowAfterTick(ctx, &w, s, firstTicks[s]); err != nil {
			return w, err
		}
	}
	return w, nil
}

// windowAfterTick lowers the window of each project with a snapshot of
// schedule taken after tick and before the window's day to the day of the
// first such snapshot: a tick recorded late changes the missed ticks of
// the interval that spans it. A snapshot's schedule is that of its rows,
// else the one release 0.3.0 counted it by (see gainschedules.go); a
// snapshot whose rows carry several counts under each, which reads more
// than needed, never less.
func (c *Checker) windowAfterTick(ctx context.Context, w *verifyWindow, schedule string, tick uint32) error {
	for _, table := range []string{schema.SnapshotsTable.Name(), schema.LegacySchedules} {
		q := fmt.Sprintf("SELECT project_id, toUInt32(min(snapshot_at)) FROM %s WHERE schedule = %s AND snapshot_at > %s AND snapshot_at < %s GROUP BY project_id",
			c.names.Table(table), chconn.QuoteString(schedule), chconn.DateTime(tick), chconn.DateTime(w.from))
		err := chconn.QueryEach(ctx, c.conn, q, func(rows driver.Rows) error {
			var (
				p     int64
				first uint32
			)
			if err := rows.Scan(&p, &first); err != nil {
				return err
			}
			w.lower(p, first)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read the snapshots of schedule %q after its tick %s recorded late, from %s: %w", schedule, sink.Time(tick), table, err)
		}
	}
	return nil
}

// lower makes project p's window start at the day of the Unix time at, if
// that is earlier than it starts.
func (w *verifyWindow) lower(p int64, at uint32) {
	day := max(chconn.DayStart(at), w.edgeDay)
	if day >= w.from {
		return
	}
	if start, ok := w.early[p]; !ok || day < start {
		w.early[p] = day
	}
}

// earliest is the start of the earliest project window, or from when
// none starts earlier.
func (w verifyWindow) earliest() uint32 {
	first := w.from
	for _, start := range w.early {
		first = min(first, start)
	}
	return first
}

// windowGroup is a group of projects whose windows start at the same day:
// the projects of early with that start, or, with all set, every project
// but those.
type windowGroup struct {
	start    uint32
	projects []int64
	all      bool
}

// groups lists the projects by the start of their windows: the early
// ones by their own start, oldest first, then all the others from from.
func (w verifyWindow) groups() []windowGroup {
	by := map[uint32][]int64{}
	for p, start := range w.early {
		by[start] = append(by[start], p)
	}
	var out []windowGroup
	for _, start := range slices.Sorted(maps.Keys(by)) {
		out = append(out, windowGroup{start: start, projects: slices.Sorted(slices.Values(by[start]))})
	}
	return append(out, windowGroup{start: w.from, all: true})
}

// coverageDays is the condition that the UTC day day, a Date expression,
// of a schedule's (a column) is in the window: from from on, or one of the
// days of the ticks recorded late.
func (w verifyWindow) coverageDays(schedule, day string) string {
	cond := fmt.Sprintf("%s >= %s", day, chconn.QuoteDate(sink.Time(w.from).Time()))
	if len(w.tickDays) == 0 {
		return cond
	}
	var pairs []string
	for d := range w.tickDays {
		pairs = append(pairs, fmt.Sprintf("(%s, %s)", chconn.QuoteString(d.schedule), chconn.QuoteDate(sink.Time(d.day*86400).Time())))
	}
	slices.Sort(pairs)
	return fmt.Sprintf("(%s OR (%s, %s) IN (%s))", cond, schedule, day, strings.Join(pairs, ", "))
}

// report puts what the window holds besides the days from from on into
// rep.
func (w verifyWindow) report(rep *Report) {
	rep.Written, rep.Ticks, rep.Earlier = w.written, w.ticks, len(w.early)
	if len(w.early) > 0 {
		rep.EarlierFrom = sink.Time(w.earliest()).Time()
	}
}

// bound writes the Unix time t as a value to compare the column with: a
// Date for a day column, else a DateTime.
func (c viewColumn) bound(t uint32) string {
	if c.kind == kindDate {
		return chconn.QuoteDate(sink.Time(t).Time())
	}
	return chconn.DateTime(t)
}
