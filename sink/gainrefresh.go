package sink

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// How readsync refreshes reads gained after each write: which snapshots,
// what it reads to find each message's previous row, and the missed ticks
// of each interval (see gains.go for what is computed).

// refreshGains recomputes the gains at the snapshots of snaps, which were
// just written by a pass of schedule (empty for a backfill or an entry
// spooled before schedules were recorded), and at the later snapshots
// whose gains they change: a backfill in the past is the previous
// snapshot of the messages' next ones.
func (c *ClickHouse) refreshGains(ctx context.Context, snaps []Snapshot, schedule string) error {
	targets := map[int64]map[uint32]bool{}
	for i := range snaps {
		p, at := snaps[i].ProjectID, uint32(snaps[i].SnapshotAt.Time().Unix())
		if targets[p] == nil {
			targets[p] = map[uint32]bool{}
		}
		targets[p][at] = true
	}
	if len(targets) == 0 {
		return nil
	}
	written := map[gainTarget]bool{}
	for p, ats := range targets {
		for at := range ats {
			written[gainTarget{p, at}] = true
		}
	}
	if err := c.addSuccessors(ctx, targets); err != nil {
		return c.redact(fmt.Errorf("refresh reads gained: %w", err))
	}
	rows, err := c.computeGains(ctx, targets, func(t gainTarget) string {
		if written[t] {
			return schedule
		}
		return ""
	})
	if err != nil {
		return c.redact(fmt.Errorf("refresh reads gained at %d project snapshots: %w", len(written), err))
	}
	return c.storeGains(ctx, rows)
}

// storeGains inserts gain rows, then refreshes the days they fall on.
func (c *ClickHouse) storeGains(ctx context.Context, rows []gainRow) error {
	if err := insert(ctx, c, &gainsTable, rows); err != nil {
		return err
	}
	days := map[projectDay]bool{}
	for _, r := range rows {
		days[projectDay{r.ProjectID, dayOf(uint32(r.SnapshotAt.Unix()))}] = true
	}
	return c.refreshGainDays(ctx, days)
}

// addSuccessors adds to targets, for each target (p, s) of a project with
// later snapshots, each of s's messages' next snapshot. Writes in order,
// the daemon's, have none: one cheap query on the snapshot rollup says so.
func (c *ClickHouse) addSuccessors(ctx context.Context, targets map[int64]map[uint32]bool) error {
	projects := slices.Sorted(maps.Keys(targets))
	lowest := uint32(math.MaxUint32)
	for _, p := range projects {
		for at := range targets[p] {
			lowest = min(lowest, at)
		}
	}
	q := fmt.Sprintf("SELECT project_id, toUInt32(max(snapshot_at)) FROM %s WHERE project_id IN (%s) AND snapshot_at > toDateTime(%d) GROUP BY project_id",
		c.ddl.table(snapshotRollup), joinInts(projects), lowest)
	latest, err := queryMap[int64, uint32](ctx, c.conn, q)
	if err != nil {
		return fmt.Errorf("look for later snapshots: %w", err)
	}
	for _, p := range projects {
		for _, at := range slices.Sorted(maps.Keys(targets[p])) {
			if latest[p] <= at {
				continue
			}
			next, err := queryColumn[uint32](ctx, c.conn, fmt.Sprintf(nextSnapshotsSQL, c.ddl.table(snapshotsTable.name), p, at))
			if err != nil {
				return fmt.Errorf("next snapshots of project %d after %s: %w", p, Time(at).Time(), err)
			}
			for _, n := range next {
				targets[p][n] = true
			}
		}
	}
	return nil
}

// nextSnapshotsSQL selects the next snapshot after %[3]d of each message
// of project %[2]d listed at %[3]d, in one pass over the project's rows
// from %[3]d on (a subquery would be a second, and in cluster mode a
// double-distributed IN).
const nextSnapshotsSQL = `SELECT DISTINCT toUInt32(next_at)
FROM
(
    SELECT message_id, minIf(snapshot_at, snapshot_at > toDateTime(%[3]d)) AS next_at, countIf(snapshot_at = toDateTime(%[3]d)) AS listed
    FROM %[1]s
    WHERE project_id = %[2]d AND snapshot_at >= toDateTime(%[3]d)
    GROUP BY message_id
)
WHERE listed > 0 AND toUInt32(next_at) > %[3]d`

// computeGains computes the gain rows of targets, with the schedule of
// each that scheduleOf knows. Projects are read together when their
// targets span the same window, which for a pass's write is all of them.
//
// A message's previous row is, for most, its row at the project's
// previous snapshot, read in the same scan as the targets' rows; only the
// messages not listed there (new ones, ones listed again after a while)
// are looked up further back, by name.
func (c *ClickHouse) computeGains(ctx context.Context, targets map[int64]map[uint32]bool, scheduleOf func(gainTarget) string) ([]gainRow, error) {
	type window struct{ from, to uint32 }
	groups := map[window][]int64{}
	for _, p := range slices.Sorted(maps.Keys(targets)) {
		ats := slices.Sorted(maps.Keys(targets[p]))
		w := window{ats[0], ats[len(ats)-1]}
		groups[w] = append(groups[w], p)
	}
	scan := newGainScan(targets, false)
	for w, projects := range groups {
		prev, err := c.previousSnapshots(ctx, projects, w.from)
		if err != nil {
			return nil, err
		}
		var dormant []int64
		for _, p := range projects {
			if _, ok := prev[p]; !ok {
				dormant = append(dormant, p)
			}
		}
		seen, err := c.projectsSeenBefore(ctx, dormant, w.from)
		if err != nil {
			return nil, err
		}
		// A message whose first row read is a target's has its previous
		// row further back, if any: its rows wait until that is looked
		// up, unless its project has no earlier snapshot at all (a new
		// project's first pass, all of whose messages are new). The
		// others go through the scan as they arrive, so that memory
		// stays the few that wait.
		var (
			waiting []scannedRow
			want    = map[msgKey]bool{}
			started bool
			last    msgKey
			wait    bool
		)
		err = c.readSnapshots(ctx, projects, prev, w.from, w.to, func(r scannedRow) {
			if !started || r.key != last {
				started = true
				_, hasPrev := prev[r.key.project]
				wait = r.row.at >= w.from && (hasPrev || seen[r.key.project])
				last = r.key
				if wait {
					want[r.key] = true
				}
			}
			if wait {
				waiting = append(waiting, r)
				return
			}
			scan.row(r.key, r.row)
		})
		if err != nil {
			return nil, err
		}
		scan.finish()
		if err := c.loadPriors(ctx, scan.priors, want, w.from); err != nil {
			return nil, err
		}
		for _, r := range waiting {
			scan.row(r.key, r.row)
		}
		scan.finish()
	}
	return c.gainRows(ctx, scan.sums, scheduleOf)
}

// projectsSeenBefore returns which of projects have a snapshot before t.
func (c *ClickHouse) projectsSeenBefore(ctx context.Context, projects []int64, t uint32) (map[int64]bool, error) {
	out := map[int64]bool{}
	if len(projects) == 0 {
		return out, nil
	}
	seen, err := queryColumn[int64](ctx, c.conn, fmt.Sprintf("SELECT DISTINCT project_id FROM %s WHERE project_id IN (%s) AND snapshot_at < toDateTime(%d)",
		c.ddl.table(snapshotRollup), joinInts(projects), t))
	if err != nil {
		return nil, fmt.Errorf("look for projects' earlier snapshots: %w", err)
	}
	for _, p := range seen {
		out[p] = true
	}
	return out, nil
}

// previousSnapshots returns each project's latest snapshot before t, if it
// has one in the week before, from the snapshot rollup.
func (c *ClickHouse) previousSnapshots(ctx context.Context, projects []int64, t uint32) (map[int64]uint32, error) {
	q := fmt.Sprintf("SELECT project_id, toUInt32(max(snapshot_at)) FROM %s WHERE project_id IN (%s) AND snapshot_at >= toDateTime(%d) AND snapshot_at < toDateTime(%d) GROUP BY project_id",
		c.ddl.table(snapshotRollup), joinInts(projects), t-min(t, previousSnapshotSpan), t)
	out, err := queryMap[int64, uint32](ctx, c.conn, q)
	if err != nil {
		return nil, fmt.Errorf("read projects' previous snapshots: %w", err)
	}
	return out, nil
}

// previousSnapshotSpan is how far back previousSnapshots looks: beyond,
// the messages are looked up one by one, as after a long outage.
const previousSnapshotSpan = 7 * 86400

// scannedRow is a row of the snapshot table as a refresh reads it.
type scannedRow struct {
	key msgKey
	row snapRow
}

// readSnapshots calls each for every row of projects with snapshot_at in
// [from, to] or at the project's snapshot in prev (nil for none), in
// gainScan's order, as the rows arrive: a refresh reads a few snapshots,
// the fold whole histories.
func (c *ClickHouse) readSnapshots(ctx context.Context, projects []int64, prev map[int64]uint32, from, to uint32, each func(scannedRow)) error {
	when := fmt.Sprintf("snapshot_at >= toDateTime(%d) AND snapshot_at <= toDateTime(%d)", from, to)
	if len(prev) > 0 {
		ats := map[uint32]bool{}
		for _, at := range prev {
			ats[at] = true
		}
		when = fmt.Sprintf("(%s OR toUInt32(snapshot_at) IN (%s))", when, joinInts(slices.Sorted(maps.Keys(ats))))
	}
	q := fmt.Sprintf(`SELECT project_id, message_id, toUInt32(snapshot_at), version, read_count
FROM %s
WHERE project_id IN (%s) AND %s
ORDER BY project_id, message_id, snapshot_at, version`, c.ddl.table(snapshotsTable.name), joinInts(projects), when)
	rows, err := c.conn.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("read snapshots from %s to %s: %w", Time(from).Time(), Time(to).Time(), err)
	}
	defer rows.Close()
	for rows.Next() {
		var r scannedRow
		if err := rows.Scan(&r.key.project, &r.key.message, &r.row.at, &r.row.version, &r.row.reads); err != nil {
			return fmt.Errorf("read snapshots: %w", err)
		}
		// Another project's previous snapshot at the same time is not
		// this one's.
		if r.row.at < from && r.row.at != prev[r.key.project] {
			continue
		}
		each(r)
	}
	return rows.Err()
}

// loadPriors puts into priors the newest row before from of each message
// in want seen before from: first those of from's day, from the snapshot
// table, then those of the days before, from the daily rollup, each read
// by message. Messages first seen from from on have none.
func (c *ClickHouse) loadPriors(ctx context.Context, priors map[msgKey]snapRow, want map[msgKey]bool, from uint32) error {
	if len(want) == 0 {
		return nil
	}
	seen, err := c.messagesIn(ctx, want, fmt.Sprintf(
		"SELECT project_id, message_id FROM %s WHERE %%s GROUP BY project_id, message_id HAVING minMerge(first_seen) < toDateTime(%d)",
		c.ddl.table(firstRollup), from))
	if err != nil {
		return fmt.Errorf("read when messages were first seen: %w", err)
	}
	for k := range want {
		if !seen[k] {
			delete(want, k)
		}
	}
	day := dayStart(from)
	for _, step := range []struct{ agg, table, where string }{
		{"max(" + snapshotRow + ")", snapshotsTable.name, fmt.Sprintf("snapshot_at >= toDateTime(%d) AND snapshot_at < toDateTime(%d)", day, from)},
		{"maxMerge(day_row)", dailyRollup, "day < " + quoteDate(Time(day).Time())},
	} {
		if len(want) == 0 {
			return nil
		}
		q := fmt.Sprintf(`SELECT project_id, message_id, %s, %s, %s
FROM
(
    SELECT project_id, message_id, %s AS message_row
    FROM %s
    WHERE %s AND %%s
    GROUP BY project_id, message_id
)`, rowUInt64("message_row", rowSnapshotAt), rowUInt64("message_row", rowVersion), rowUInt64("message_row", rowReadCount),
			step.agg, c.ddl.table(step.table), step.where)
		err := c.queryIn(ctx, want, q, func(rows driver.Rows) error {
			var (
				k     msgKey
				at, v uint64
				r     snapRow
			)
			if err := rows.Scan(&k.project, &k.message, &at, &v, &r.reads); err != nil {
				return err
			}
			r.at, r.version = uint32(at), v
			priors[k] = r
			delete(want, k)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read messages' rows before %s: %w", Time(from).Time(), err)
		}
	}
	return nil
}

// queryIn runs q, whose %s is replaced by a condition that selects the
// messages of want, calling each for every row. The messages go as
// external data, a table sent with the query, however many; GLOBAL makes
// the shards of a cluster receive it too.
func (c *ClickHouse) queryIn(ctx context.Context, want map[msgKey]bool, q string, each func(driver.Rows) error) error {
	input, err := ext.NewTable("wanted", ext.Column("project_id", "Int64"), ext.Column("message_id", "Int64"))
	if err != nil {
		return err
	}
	projects := map[int64]bool{}
	for k := range want {
		projects[k.project] = true
		if err := input.Append(k.project, k.message); err != nil {
			return err
		}
	}
	cond := fmt.Sprintf("project_id IN (%s) AND (project_id, message_id) GLOBAL IN (SELECT project_id, message_id FROM wanted)", joinInts(slices.Sorted(maps.Keys(projects))))
	rows, err := c.conn.Query(clickhouse.Context(ctx, clickhouse.WithExternalTable(input)), fmt.Sprintf(q, cond))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// quoteDate writes t's UTC day as a Date literal.
func quoteDate(t time.Time) string { return "toDate('" + t.UTC().Format(time.DateOnly) + "')" }

// messagesIn returns the messages of want that q, queried as by queryIn,
// selects.
func (c *ClickHouse) messagesIn(ctx context.Context, want map[msgKey]bool, q string) (map[msgKey]bool, error) {
	out := map[msgKey]bool{}
	err := c.queryIn(ctx, want, q, func(rows driver.Rows) error {
		var k msgKey
		if err := rows.Scan(&k.project, &k.message); err != nil {
			return err
		}
		out[k] = true
		return nil
	})
	return out, err
}

// gainRows turns the sums into rows, counting each one's missed ticks.
func (c *ClickHouse) gainRows(ctx context.Context, sums map[gainTarget]*gainSum, scheduleOf func(gainTarget) string) ([]gainRow, error) {
	schedules := map[gainTarget]string{}
	unknown := map[int64]bool{}
	for t := range sums {
		if s := scheduleOf(t); s != "" {
			schedules[t] = s
		} else {
			unknown[t.project] = true
		}
	}
	if len(unknown) > 0 {
		known, err := c.projectSchedules(ctx, slices.Sorted(maps.Keys(unknown)))
		if err != nil {
			return nil, err
		}
		for t := range sums {
			if _, ok := schedules[t]; !ok && known[t.project] != "" {
				schedules[t] = known[t.project]
			}
		}
	}
	ticks, err := c.ticksOf(ctx, sums, schedules)
	if err != nil {
		return nil, err
	}
	out := make([]gainRow, 0, len(sums))
	for _, t := range slices.SortedFunc(maps.Keys(sums), gainTarget.compare) {
		g := sums[t]
		sched := schedules[t]
		var missed uint64
		if g.prevAt > 0 && sched != "" {
			ts := ticks[sched]
			lo, _ := slices.BinarySearch(ts, g.prevAt+1)
			hi, _ := slices.BinarySearch(ts, t.at)
			missed = uint64(hi - lo)
		}
		out = append(out, gainRow{
			ProjectID: t.project, SnapshotAt: Time(t.at).Time(), Key: g.key(sched != "", missed), PrevAt: Time(g.prevAt).Time(),
			Messages: g.messages, NewMessages: g.newMessages, Reads: int64(g.reads), MissedTicks: missed, Schedule: sched,
		})
	}
	return out, nil
}

// projectSchedules returns the schedule of each project's latest
// scheduled snapshot in the gains rollup: the schedule a backfilled
// snapshot between two of them is judged by.
func (c *ClickHouse) projectSchedules(ctx context.Context, projects []int64) (map[int64]string, error) {
	q := fmt.Sprintf("SELECT project_id, argMax(gain_schedule, snapshot_at) FROM %s WHERE project_id IN (%s) AND gain_schedule != '' GROUP BY project_id",
		c.ddl.table(gainsRollup), joinInts(projects))
	out, err := queryMap[int64, string](ctx, c.conn, q)
	if err != nil {
		return nil, fmt.Errorf("read projects' schedules: %w", err)
	}
	return out, nil
}

// ticksOf returns, per schedule, the sorted times of its cron ticks that
// sync_runs records within the intervals of sums.
func (c *ClickHouse) ticksOf(ctx context.Context, sums map[gainTarget]*gainSum, schedules map[gainTarget]string) (map[string][]uint32, error) {
	type span struct{ lo, hi uint32 }
	spans := map[string]span{}
	for t, g := range sums {
		s, ok := schedules[t]
		if !ok || g.prevAt == 0 {
			continue
		}
		sp, seen := spans[s]
		if !seen {
			sp = span{g.prevAt, t.at}
		}
		spans[s] = span{min(sp.lo, g.prevAt), max(sp.hi, t.at)}
	}
	out := map[string][]uint32{}
	for _, s := range slices.Sorted(maps.Keys(spans)) {
		sp := spans[s]
		ts, err := queryColumn[uint32](ctx, c.conn, fmt.Sprintf(
			"SELECT DISTINCT toUInt32(snapshot_at) AS tick FROM %s WHERE trigger = 'cron' AND schedule = %s AND snapshot_at > toDateTime(%d) AND snapshot_at < toDateTime(%d) ORDER BY tick",
			c.ddl.table(runsTable.name), quoteString(s), sp.lo, sp.hi))
		if err != nil {
			return nil, fmt.Errorf("read the ticks of schedule %q: %w", s, err)
		}
		out[s] = ts
	}
	return out, nil
}
