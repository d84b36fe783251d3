package derived

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// How readsync refreshes the derived rows of project snapshots: after each
// write, the snapshots it wrote; after each pass, those the server
// recorded as changed since the last reconcile (see reconcile.go). What
// is computed is in gains.go, dayrefresh.go and gaindays.go, with the SQL
// of package schema.

// writtenSnapshots is the set of project snapshots of rows just written.
func writtenSnapshots(snaps []sink.Snapshot) chconn.SnapshotSet {
	s := chconn.SnapshotSet{}
	for i := range snaps {
		s.Add(snaps[i].ProjectID, uint32(snaps[i].SnapshotAt))
	}
	return s
}

// Refresh recomputes the derived rows of the project snapshots the rows
// written, just written, are at: the days they fall on in the day rollup,
// the gains at each of them and at the later snapshots whose previous rows
// they are, and the days of those in the day gains rollup.
func (h *History) Refresh(ctx context.Context, written []sink.Snapshot) error {
	_, err := h.refreshSets(ctx, writtenSnapshots(written), nil)
	return err
}

// refreshSets is Refresh, with also the gains at the snapshots of also,
// whose rows did not change but whose missed ticks may have. A gains row
// whose key the rollup holds already is not written again, so a refresh of
// what is current writes only the day states, which their rollups merge.
func (h *History) refreshSets(ctx context.Context, written, also chconn.SnapshotSet) (refreshResult, error) {
	var res refreshResult
	targets := chconn.SnapshotSet{}
	targets.AddAll(written)
	targets.AddAll(also)
	if targets.Len() == 0 {
		return res, nil
	}
	if err := h.refreshDays(ctx, written.Days()); err != nil {
		return res, err
	}
	if err := h.addSuccessors(ctx, targets, written); err != nil {
		return res, h.conn.Redact(fmt.Errorf("refresh reads gained: %w", err))
	}
	res.targets = targets.Len()
	rows, err := h.computeGains(ctx, targets)
	if err != nil {
		return res, h.conn.Redact(fmt.Errorf("refresh reads gained at %d project snapshots: %w", targets.Len(), err))
	}
	res.rewritten, err = h.storeGains(ctx, rows, targets.Days())
	return res, err
}

// storeGains inserts the gain rows whose key the rollup does not hold as
// its highest for their snapshot, then refreshes days; it returns how many
// rows it inserted.
func (h *History) storeGains(ctx context.Context, rows []schema.GainRow, days map[chconn.ProjectDay]bool) (int, error) {
	set := chconn.SnapshotSet{}
	for _, r := range rows {
		set.Add(r.ProjectID, uint32(r.SnapshotAt.Unix()))
	}
	stored, err := h.storedGainKeys(ctx, set)
	if err != nil {
		return 0, err
	}
	var fresh []schema.GainRow
	for _, r := range rows {
		if stored[gainTarget{r.ProjectID, uint32(r.SnapshotAt.Unix())}] != r.Key {
			fresh = append(fresh, r)
		}
	}
	if err := chconn.Insert(ctx, h.conn, schema.GainsTable, nil, fresh); err != nil {
		return 0, err
	}
	return len(fresh), h.refreshGainDays(ctx, days)
}

// storedGainKeys returns the highest key the gains rollup holds for each
// snapshot of set that it has.
func (h *History) storedGainKeys(ctx context.Context, set chconn.SnapshotSet) (map[gainTarget]string, error) {
	out := map[gainTarget]string{}
	if set.Len() == 0 {
		return out, nil
	}
	tables, cond, err := snapshotCondition(set, "stored")
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf("SELECT project_id, toUInt32(snapshot_at), max(gain_key) FROM %s WHERE %s GROUP BY project_id, snapshot_at",
		h.names.Table(schema.GainsRollup), cond)
	err = chconn.QueryEach(chconn.WithExternal(ctx, tables...), h.conn, q, func(rows driver.Rows) error {
		var (
			t   gainTarget
			key string
		)
		if err := rows.Scan(&t.project, &t.at, &key); err != nil {
			return err
		}
		if set.Has(t.project, t.at) {
			out[t] = key
		}
		return nil
	})
	if err != nil {
		return nil, h.conn.Redact(fmt.Errorf("read the keys of %s: %w", schema.GainsRollup, err))
	}
	return out, nil
}

// snapshotCondition returns the external tables and the condition that
// select the rows of set's project snapshots, and a few more of the same
// projects at the same times, which the caller skips: the projects and the
// times narrow the read by the primary key and the partitions, where a
// condition on the pairs would be read row by row.
func snapshotCondition(set chconn.SnapshotSet, name string) ([]*chconn.ExtTable, string, error) {
	pt, err := chconn.ProjectsExt(name+"_projects", set.Projects())
	if err != nil {
		return nil, "", err
	}
	times := map[uint32]bool{}
	for _, ats := range set {
		for at := range ats {
			times[at] = true
		}
	}
	tt, err := chconn.NewExtTable(name+"_times", "snapshot_at", "DateTime")
	if err != nil {
		return nil, "", err
	}
	for _, at := range slices.Sorted(maps.Keys(times)) {
		if err := tt.Append(sink.Time(at).Time()); err != nil {
			return nil, "", err
		}
	}
	return []*chconn.ExtTable{pt, tt}, chconn.InExt("project_id", name+"_projects") + " AND " + chconn.InExt("snapshot_at", name+"_times"), nil
}

// addSuccessors adds to targets, for each snapshot (p, s) of written that
// has a later snapshot, each of s's messages' next snapshot: s is now its
// previous one. Writes in order, the daemon's, have none: one cheap query
// on the snapshot rollup says so.
func (h *History) addSuccessors(ctx context.Context, targets, written chconn.SnapshotSet) error {
	first := map[int64]uint32{}
	lowest := uint32(math.MaxUint32)
	for p, ats := range written {
		f := slices.Min(slices.Collect(maps.Keys(ats)))
		first[p], lowest = f, min(lowest, f)
	}
	pt, err := chconn.ProjectsExt("written", written.Projects())
	if err != nil {
		return err
	}
	q := fmt.Sprintf("SELECT project_id, toUInt32(max(snapshot_at)) FROM %s WHERE %s AND snapshot_at > %s GROUP BY project_id",
		h.names.Table(schema.SnapshotRollup), chconn.InExt("project_id", "written"), chconn.DateTime(lowest))
	latest, err := chconn.QueryMap[int64, uint32](chconn.WithExternal(ctx, pt), h.conn, q)
	if err != nil {
		return fmt.Errorf("look for later snapshots: %w", err)
	}
	later := chconn.SnapshotSet{}
	for p, ats := range written {
		for at := range ats {
			if latest[p] > at {
				later.Add(p, at)
			}
		}
	}
	if later.Len() == 0 {
		return nil
	}
	lowest = uint32(math.MaxUint32)
	for _, ats := range later {
		for at := range ats {
			lowest = min(lowest, at)
		}
	}
	lp, err := chconn.ProjectsExt("later", later.Projects())
	if err != nil {
		return err
	}
	lt, err := chconn.SnapshotsExt("later_snapshots", later)
	if err != nil {
		return err
	}
	q = fmt.Sprintf(nextSnapshotsSQL, h.names.Table(schema.SnapshotsTable.Name()), chconn.InExt("project_id", "later"), chconn.DateTime(lowest))
	err = chconn.QueryEach(chconn.WithExternal(ctx, lp, lt), h.conn, q, func(rows driver.Rows) error {
		var (
			p    int64
			next uint32
		)
		if err := rows.Scan(&p, &next); err != nil {
			return err
		}
		targets.Add(p, next)
		return nil
	})
	if err != nil {
		return fmt.Errorf("next snapshots of %d written snapshots: %w", later.Len(), err)
	}
	return nil
}

// nextSnapshotsSQL selects, from the rows of each project from its
// earliest written snapshot on, the next snapshot after each written one
// of each message listed there: each message's snapshots in order, paired
// with the one after, kept where the first is a written snapshot. Its
// cost is the rows read, however many of a project's snapshots were
// written (a join of the rows to the written snapshots would cost their
// product: a backfill of a project's past is many of both).
const nextSnapshotsSQL = `SELECT DISTINCT project_id, toUInt32(next_at)
FROM
(
    SELECT project_id, arraySort(groupUniqArray(snapshot_at)) AS ats
    FROM %s
    WHERE %s AND snapshot_at >= %s
    GROUP BY project_id, message_id
)
ARRAY JOIN arrayPopBack(ats) AS at, arrayPopFront(ats) AS next_at
WHERE (project_id, at) GLOBAL IN (SELECT project_id, snapshot_at FROM later_snapshots)`

// computeGains computes the gain rows of targets. Projects whose targets
// fall on the same days are read together, in one window from their
// earliest target to their latest: for a pass's write, all of them.
//
// A message's previous row is, for most, its row at the project's
// previous snapshot, read in the same scan as the targets' rows; only the
// messages not listed there (new ones, ones listed again after a while)
// are looked up further back, by name.
func (h *History) computeGains(ctx context.Context, targets chconn.SnapshotSet) ([]schema.GainRow, error) {
	type window struct{ from, to uint32 }
	type days struct{ from, to uint32 }
	groups := map[days][]int64{}
	spans := map[days]window{}
	for _, p := range targets.Projects() {
		ats := slices.Sorted(maps.Keys(targets[p]))
		d := days{chconn.DayOf(ats[0]), chconn.DayOf(ats[len(ats)-1])}
		groups[d] = append(groups[d], p)
		w, ok := spans[d]
		if !ok {
			w = window{ats[0], ats[len(ats)-1]}
		}
		spans[d] = window{min(w.from, ats[0]), max(w.to, ats[len(ats)-1])}
	}
	scan := newGainScan(targets, false)
	for _, d := range slices.SortedFunc(maps.Keys(groups), func(a, b days) int { return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to)) }) {
		if err := h.scanWindow(ctx, scan, groups[d], spans[d].from, spans[d].to); err != nil {
			return nil, err
		}
	}
	return h.gainRows(ctx, scan.sums, scan.writes)
}

// scanWindow feeds scan the rows of projects from from to to, each
// message's previous row first.
func (h *History) scanWindow(ctx context.Context, scan *gainScan, projects []int64, from, to uint32) error {
	prev, err := h.previousSnapshots(ctx, projects, from)
	if err != nil {
		return err
	}
	var dormant []int64
	for _, p := range projects {
		if _, ok := prev[p]; !ok {
			dormant = append(dormant, p)
		}
	}
	seen, err := h.projectsSeenBefore(ctx, dormant, from)
	if err != nil {
		return err
	}
	// A message whose first row read is in the window has its previous
	// row further back, if any: its rows wait until that is looked up,
	// unless its project has no earlier snapshot at all (a new project's
	// first pass, all of whose messages are new). The others go through
	// the scan as they arrive, so that memory stays the few that wait.
	var (
		waiting []scannedRow
		want    = map[msgKey]bool{}
		started bool
		last    msgKey
		wait    bool
	)
	err = h.readSnapshots(ctx, projects, prev, from, to, func(r scannedRow) {
		if !started || r.key != last {
			started = true
			_, hasPrev := prev[r.key.project]
			wait = r.row.at >= from && (hasPrev || seen[r.key.project])
			last = r.key
			if wait {
				want[r.key] = true
			}
		}
		if wait {
			waiting = append(waiting, r)
			return
		}
		scan.take(r)
	})
	if err != nil {
		return err
	}
	scan.finish()
	if err := h.loadPriors(ctx, scan.priors, want, from); err != nil {
		return err
	}
	for _, r := range waiting {
		scan.take(r)
	}
	scan.finish()
	return nil
}

// projectsSeenBefore returns which of projects have a snapshot before t.
func (h *History) projectsSeenBefore(ctx context.Context, projects []int64, t uint32) (map[int64]bool, error) {
	out := map[int64]bool{}
	if len(projects) == 0 {
		return out, nil
	}
	pt, err := chconn.ProjectsExt("dormant", projects)
	if err != nil {
		return nil, err
	}
	seen, err := chconn.QueryColumn[int64](chconn.WithExternal(ctx, pt), h.conn, fmt.Sprintf("SELECT DISTINCT project_id FROM %s WHERE %s AND snapshot_at < %s",
		h.names.Table(schema.SnapshotRollup), chconn.InExt("project_id", "dormant"), chconn.DateTime(t)))
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
func (h *History) previousSnapshots(ctx context.Context, projects []int64, t uint32) (map[int64]uint32, error) {
	pt, err := chconn.ProjectsExt("scanned", projects)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf("SELECT project_id, toUInt32(max(snapshot_at)) FROM %s WHERE %s AND snapshot_at >= %s AND snapshot_at < %s GROUP BY project_id",
		h.names.Table(schema.SnapshotRollup), chconn.InExt("project_id", "scanned"), chconn.DateTime(t-min(t, previousSnapshotSpan)), chconn.DateTime(t))
	out, err := chconn.QueryMap[int64, uint32](chconn.WithExternal(ctx, pt), h.conn, q)
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
	// schedule is the row's, which the newest write at its snapshot
	// stands for (see gainschedules.go).
	schedule string
}

// readSnapshots calls each for every row of projects with snapshot_at in
// [from, to] or at the project's snapshot in prev (nil for none), in
// gainScan's order, as the rows arrive: a refresh reads a few snapshots,
// the fold whole histories.
func (h *History) readSnapshots(ctx context.Context, projects []int64, prev map[int64]uint32, from, to uint32, each func(scannedRow)) error {
	pt, err := chconn.ProjectsExt("scanned", projects)
	if err != nil {
		return err
	}
	tables := []*chconn.ExtTable{pt}
	when := fmt.Sprintf("snapshot_at >= %s AND snapshot_at <= %s", chconn.DateTime(from), chconn.DateTime(to))
	if len(prev) > 0 {
		// The times only, which the partitions' ranges narrow; another
		// project's previous snapshot at the same time is skipped below.
		ats := map[uint32]bool{}
		for _, at := range prev {
			ats[at] = true
		}
		tt, err := chconn.NewExtTable("previous_times", "snapshot_at", "DateTime")
		if err != nil {
			return err
		}
		for _, at := range slices.Sorted(maps.Keys(ats)) {
			if err := tt.Append(sink.Time(at).Time()); err != nil {
				return err
			}
		}
		tables = append(tables, tt)
		when = fmt.Sprintf("(%s OR %s)", when, chconn.InExt("snapshot_at", "previous_times"))
	}
	q := fmt.Sprintf(`SELECT project_id, message_id, toUInt32(snapshot_at), version, read_count, total, schedule
FROM %s
WHERE %s AND %s
ORDER BY project_id, message_id, snapshot_at, version`, h.names.Table(schema.SnapshotsTable.Name()), chconn.InExt("project_id", "scanned"), when)
	rows, err := h.conn.Query(chconn.WithExternal(ctx, tables...), q)
	if err != nil {
		return fmt.Errorf("read snapshots from %s to %s: %w", sink.Time(from), sink.Time(to), err)
	}
	defer rows.Close()
	for rows.Next() {
		var r scannedRow
		if err := rows.Scan(&r.key.project, &r.key.message, &r.row.at, &r.row.version, &r.row.reads, &r.row.total, &r.schedule); err != nil {
			return fmt.Errorf("read snapshots: %w", err)
		}
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
func (h *History) loadPriors(ctx context.Context, priors map[msgKey]snapRow, want map[msgKey]bool, from uint32) error {
	if len(want) == 0 {
		return nil
	}
	seen, err := h.messagesIn(ctx, want, fmt.Sprintf(
		"SELECT project_id, message_id FROM %s WHERE %%s GROUP BY project_id, message_id HAVING minMerge(first_seen) < %s",
		h.names.Table(schema.FirstRollup), chconn.DateTime(from)))
	if err != nil {
		return fmt.Errorf("read when messages were first seen: %w", err)
	}
	for k := range want {
		if !seen[k] {
			delete(want, k)
		}
	}
	day := chconn.DayStart(from)
	for _, step := range []struct{ agg, table, where string }{
		{"max(" + schema.SnapshotRow + ")", schema.SnapshotsTable.Name(), fmt.Sprintf("snapshot_at >= %s AND snapshot_at < %s", chconn.DateTime(day), chconn.DateTime(from))},
		{"maxMerge(day_row)", schema.DailyRollup, "day < " + chconn.QuoteDate(sink.Time(day).Time())},
	} {
		if len(want) == 0 {
			return nil
		}
		q := fmt.Sprintf(`SELECT project_id, message_id, %s, %s, %s, %s
FROM
(
    SELECT project_id, message_id, %s AS message_row
    FROM %s
    WHERE %s AND %%s
    GROUP BY project_id, message_id
)`, schema.RowUInt64("message_row", schema.RowSnapshotAt), schema.RowUInt64("message_row", schema.RowVersion), schema.RowUInt64("message_row", schema.RowReadCount),
			schema.RowUInt64("message_row", schema.RowTotal), step.agg, h.names.Table(step.table), step.where)
		err := h.queryIn(ctx, want, q, func(rows driver.Rows) error {
			var (
				k     msgKey
				at, v uint64
				r     snapRow
			)
			if err := rows.Scan(&k.project, &k.message, &at, &v, &r.reads, &r.total); err != nil {
				return err
			}
			r.at, r.version = uint32(at), v
			priors[k] = r
			delete(want, k)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read messages' rows before %s: %w", sink.Time(from), err)
		}
	}
	return nil
}

// queryIn runs q, whose %s is replaced by a condition that selects the
// messages of want, calling each for every row. The messages go as
// external data, however many.
func (h *History) queryIn(ctx context.Context, want map[msgKey]bool, q string, each func(driver.Rows) error) error {
	wanted, err := chconn.NewExtTable("wanted", "project_id", "Int64", "message_id", "Int64")
	if err != nil {
		return err
	}
	projects := map[int64]bool{}
	for _, k := range slices.SortedFunc(maps.Keys(want), func(a, b msgKey) int {
		return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.message, b.message))
	}) {
		projects[k.project] = true
		if err := wanted.Append(k.project, k.message); err != nil {
			return err
		}
	}
	pt, err := chconn.ProjectsExt("wanted_projects", slices.Sorted(maps.Keys(projects)))
	if err != nil {
		return err
	}
	cond := chconn.InExt("project_id", "wanted_projects") + " AND " + chconn.InExt("project_id, message_id", "wanted")
	return chconn.QueryEach(chconn.WithExternal(ctx, pt, wanted), h.conn, fmt.Sprintf(q, cond), each)
}

// messagesIn returns the messages of want that q, queried as by queryIn,
// selects.
func (h *History) messagesIn(ctx context.Context, want map[msgKey]bool, q string) (map[msgKey]bool, error) {
	out := map[msgKey]bool{}
	err := h.queryIn(ctx, want, q, func(rows driver.Rows) error {
		var k msgKey
		if err := rows.Scan(&k.project, &k.message); err != nil {
			return err
		}
		out[k] = true
		return nil
	})
	return out, err
}

// gainRows turns the sums into rows, with each one's schedule (that of
// the newest write the scan read at it, else the one release 0.3.0 kept)
// and missed ticks.
func (h *History) gainRows(ctx context.Context, sums map[gainTarget]*gainSum, writes map[gainTarget]newestWrite) ([]schema.GainRow, error) {
	schedules := map[gainTarget]string{}
	unknown := chconn.SnapshotSet{}
	for t := range sums {
		if s := writes[t].schedule; s != "" {
			schedules[t] = s
		} else {
			unknown.Add(t.project, t.at)
		}
	}
	legacy, err := h.legacySchedules(ctx, unknown)
	if err != nil {
		return nil, err
	}
	maps.Copy(schedules, legacy)
	ticks, err := h.ticksOf(ctx, sums, schedules)
	if err != nil {
		return nil, err
	}
	out := make([]schema.GainRow, 0, len(sums))
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
		out = append(out, schema.GainRow{
			ProjectID: t.project, SnapshotAt: sink.Time(t.at).Time(), Key: g.key(sched != "", missed), PrevAt: sink.Time(g.prevAt).Time(),
			Messages: g.messages, NewMessages: g.newMessages, Reads: int64(g.reads), MissedTicks: missed, Schedule: sched,
			SnapMessages: g.topMessages, SnapReads: g.topReads, SnapTotal: g.topTotal,
		})
	}
	return out, nil
}

// ticksOf returns, per schedule, the sorted times of its cron ticks that
// sync_runs records within the intervals of sums.
func (h *History) ticksOf(ctx context.Context, sums map[gainTarget]*gainSum, schedules map[gainTarget]string) (map[string][]uint32, error) {
	type span struct{ lo, hi uint32 }
	spans := map[string]span{}
	for t, g := range sums {
		s := schedules[t]
		if s == "" || g.prevAt == 0 {
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
		ts, err := chconn.QueryColumn[uint32](ctx, h.conn, fmt.Sprintf(
			"SELECT DISTINCT toUInt32(snapshot_at) AS tick FROM %s WHERE trigger = 'cron' AND schedule = %s AND snapshot_at > %s AND snapshot_at < %s ORDER BY tick",
			h.names.Table(schema.RunsTable.Name()), chconn.QuoteString(s), chconn.DateTime(sp.lo), chconn.DateTime(sp.hi)))
		if err != nil {
			return nil, fmt.Errorf("read the ticks of schedule %q: %w", s, err)
		}
		out[s] = ts
	}
	return out, nil
}
