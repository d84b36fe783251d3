package derived

import (
	"cmp"
	"context"
	"fmt"
	"maps"
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
// written, just written, are at: the days and hours they fall on in the
// day and hour rollups, the gains at each of them and at the later
// snapshots whose previous rows they are, and the days and hours of those
// in the gains rollups, and the speeds of their messages from what aged,
// FillAges' account of the write, added to their curves (refreshSpeeds;
// nil for nothing). prepared is what Prepare read before the write
// (nil for nothing): the writes it allows are refreshed at the tip
// (tips.go), the others from the stored history. schedule is the
// schedule of the pass that wrote them, empty for a backfill. Once done,
// it records the refresh (refreshes), so that the reconcile leaves the
// changes it made alone.
func (h *History) Refresh(ctx context.Context, written []sink.Snapshot, schedule string, prepared *Prepared, aged *Aged) error {
	if len(written) == 0 {
		return nil
	}
	atTip, rest := prepared.splitAtTip(written)
	id := prepared.refreshID()
	if len(rest) > 0 {
		stored := writtenSnapshots(rest)
		refresh := func() error {
			_, err := h.refreshSets(ctx, stored, nil)
			return err
		}
		var err error
		if prepared.recorded() {
			// Prepare recorded the start before the write.
			if err = refresh(); err == nil {
				err = h.recordEnds(ctx, id, stored.Projects())
			}
		} else {
			err = h.recomputing(ctx, id, stored.Projects(), refresh)
		}
		if err != nil {
			return err
		}
	}
	if err := h.refreshAtTip(ctx, prepared, atTip, written, schedule); err != nil {
		return err
	}
	carried, err := h.refreshSpeeds(ctx, aged, prepared)
	if err != nil {
		return err
	}
	if err := h.refreshRaced(ctx, id, prepared, atTip, carried); err != nil {
		return err
	}
	return h.recordDone(ctx, id, prepared, writtenSnapshots(written))
}

// refreshRaced refreshes again, from the stored history, what the write's
// refresh computed from derived rows another recomputation (a reconcile
// step's, a fold's, another writer's) of the same project may have
// changed while the refresh read and wrote them: the writes refreshed at
// the tip, and the speeds carried forward (speeds.go), each message's
// from its whole curve. A tip's recomputation may have read the derived
// rows before the refresh wrote them and written its own after, without
// the write, under a key that outranks the refresh's; or written a tip
// the refresh did not see. A speed was carried from the row the
// recomputation was replacing: when the recomputation added snapshots
// older than the row's latest (an import, a replay of an outage) and
// wrote its row before the carried one, the carried row, of a higher
// version, hides them. The reconcile would mend a tip once its settle
// delay passed, but a daemon stopped before that would leave the views
// wrong until its next start, and it leaves a speed the write recorded
// as done alone. The stored history holds both the write and what the
// other recomputation read, so a refresh from it now outranks both (a
// speed from the curve has the carried row's version and is inserted
// after it). A recomputation that started after the write read it: it
// too is taken for a race, which costs a refresh, not a wrong row.
//
// Without a record of recomputations (cluster mode), or of the write's
// reads, the write's change is not recorded as done, and the reconcile
// recomputes it from the stored history, speeds included.
func (h *History) refreshRaced(ctx context.Context, id uint64, prepared *Prepared, tips tipWrites, carried []msgKey) error {
	if !h.tipped() || (len(tips) == 0 && len(carried) == 0) || prepared == nil || prepared.readAt == 0 {
		return nil
	}
	var projects []int64
	for _, w := range tips {
		projects = append(projects, w.project)
	}
	for _, k := range carried {
		projects = append(projects, k.project)
	}
	slices.Sort(projects)
	projects = slices.Compact(projects)
	// Every record read was made before this read: a recomputation found
	// started before now, and raced the refresh unless it ended before
	// the refresh's reads began.
	recs, err := h.recomputationsWithin(ctx, projects, []timeRange{{sub(prepared.readAt, secs(h.RefreshLease())), prepared.readAt + secs(refreshSpan)}})
	if err != nil {
		return err
	}
	raced := projects[:0]
	for _, p := range projects {
		if slices.ContainsFunc(recs[p], func(r recomputation) bool { return r.id != id && r.end >= prepared.readAt }) {
			raced = append(raced, p)
		}
	}
	if len(raced) == 0 {
		return nil
	}
	isRaced := func(p int64) bool { _, ok := slices.BinarySearch(raced, p); return ok }
	tipsRaced := chconn.SnapshotSet{}
	for _, w := range tips {
		if isRaced(w.project) {
			tipsRaced.Add(w.project, w.at)
		}
	}
	var speedsRaced []msgKey
	for _, k := range carried {
		if isRaced(k.project) {
			speedsRaced = append(speedsRaced, k)
		}
	}
	h.conn.Log().Debug("a refresh raced a recomputation; refreshing from the stored history",
		"tip_projects", len(tipsRaced.Projects()), "carried_speeds", len(speedsRaced))
	return h.recomputing(ctx, id, raced, func() error {
		if _, err := h.refreshSets(ctx, tipsRaced, nil); err != nil {
			return err
		}
		return h.speedsFromCurves(ctx, speedsRaced)
	})
}

// refreshSets recomputes, from the stored history, the derived rows of the
// project snapshots written (see Refresh), and the gains at the snapshots
// of also, whose rows did not change but whose missed ticks may have. A
// gains row whose key the rollup holds already is not written again, so
// a refresh of what is current writes only the period states, which their
// rollups merge.
func (h *History) refreshSets(ctx context.Context, written, also chconn.SnapshotSet) (refreshResult, error) {
	var res refreshResult
	targets := chconn.SnapshotSet{}
	targets.AddAll(written)
	targets.AddAll(also)
	if targets.Len() == 0 {
		return res, nil
	}
	if err := h.refreshDays(ctx, written); err != nil {
		return res, err
	}
	newest, err := h.addSuccessors(ctx, targets, written)
	if err != nil {
		return res, h.conn.Redact(fmt.Errorf("refresh reads gained: %w", err))
	}
	res.targets = targets.Len()
	rows, err := h.computeGains(ctx, targets)
	if err != nil {
		return res, h.conn.Redact(fmt.Errorf("refresh reads gained at %d project snapshots: %w", targets.Len(), err))
	}
	res.rewritten, err = h.storeGains(ctx, rows, targets, newest)
	return res, err
}

// storeGains inserts the gain rows whose key the rollup does not hold as
// its highest for their snapshot, then refreshes the days and hours of
// the snapshots of periods, and the tips of the projects of newest (their
// newest snapshots) where those fall on them; it returns how many rows it
// inserted.
func (h *History) storeGains(ctx context.Context, rows []schema.GainRow, periods chconn.SnapshotSet, newest map[int64]uint32) (int, error) {
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
	tips, err := h.refreshGainDays(ctx, periods, newest)
	if err != nil {
		return 0, err
	}
	return len(fresh), h.writeTips(ctx, tips)
}

// storedGainKeys returns the highest key the gains rollup holds for each
// snapshot of set that it has.
func (h *History) storedGainKeys(ctx context.Context, set chconn.SnapshotSet) (map[gainTarget]string, error) {
	out := map[gainTarget]string{}
	if set.Len() == 0 {
		return out, nil
	}
	tables, cond, err := h.names.SnapshotsIn("stored", set)
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

// computeGains computes the gain rows of targets. Projects whose targets
// fall on the same days are read together, in one window from their
// earliest target to their latest: for a pass's write, all of them.
//
// A message's previous row is, for most, its row at the project's
// previous snapshot, read in the same scan as the targets' rows; only the
// messages not listed there (new ones, ones listed again after a while)
// are looked up further back, by name.
func (h *History) computeGains(ctx context.Context, targets chconn.SnapshotSet) ([]schema.GainRow, error) {
	scan := newGainScan(targets, false)
	for _, g := range groupByDays(targets) {
		if err := h.scanWindow(ctx, scan, g.projects, g.from, g.to); err != nil {
			return nil, err
		}
	}
	return h.gainRows(ctx, scan.sums, scan.writes)
}

// dayGroup is a group of projects whose snapshots of a set fall on the
// same first and last UTC day, and the span of those snapshots: what one
// read of their rows, by the sort key's project and time, covers.
type dayGroup struct {
	projects []int64
	from, to uint32
}

// groupByDays groups the projects of set by the days of their first and
// last snapshot in it, in order of those days.
func groupByDays(set chconn.SnapshotSet) []dayGroup {
	type days struct{ from, to uint32 }
	groups := map[days]*dayGroup{}
	for _, p := range set.Projects() {
		ats := slices.Sorted(maps.Keys(set[p]))
		d := days{chconn.DayOf(ats[0]), chconn.DayOf(ats[len(ats)-1])}
		g, ok := groups[d]
		if !ok {
			g = &dayGroup{from: ats[0], to: ats[len(ats)-1]}
			groups[d] = g
		}
		g.projects = append(g.projects, p)
		g.from, g.to = min(g.from, ats[0]), max(g.to, ats[len(ats)-1])
	}
	var out []dayGroup
	for _, d := range slices.SortedFunc(maps.Keys(groups), func(a, b days) int { return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to)) }) {
		out = append(out, *groups[d])
	}
	return out
}

// scanWindow feeds scan the rows of projects from from to to, each
// message's previous row first: the row at its project's previous
// snapshot, read by the pairs of project and snapshot, or, for a message
// not listed there, its newest row before, looked up by message.
func (h *History) scanWindow(ctx context.Context, scan *gainScan, projects []int64, from, to uint32) error {
	prev, err := h.previousSnapshots(ctx, projects, from)
	if err != nil {
		return err
	}
	priors, err := h.priorRows(ctx, prev)
	if err != nil {
		return err
	}
	maps.Copy(scan.priors, priors)
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
	// A message not listed at its project's previous snapshot has its
	// previous row further back, if any: its rows wait until that is
	// looked up, unless its project has no earlier snapshot at all (a new
	// project's first pass, all of whose messages are new). The others go
	// through the scan as they arrive, so that memory stays the few that
	// wait.
	var (
		waiting []scannedRow
		want    = map[msgKey]bool{}
		started bool
		last    msgKey
		wait    bool
	)
	err = h.readSnapshots(ctx, projects, from, to, func(r scannedRow) {
		if !started || r.key != last {
			started = true
			_, hasPrior := priors[r.key]
			_, hasPrev := prev[r.key.project]
			wait = !hasPrior && (hasPrev || seen[r.key.project])
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

// scannedRow is a row of the snapshot table as a refresh reads it.
type scannedRow struct {
	key msgKey
	row snapRow
	// schedule is the row's, which the newest write at its snapshot
	// stands for (see gainschedules.go).
	schedule string
}

// readSnapshots calls each for every row of projects with snapshot_at in
// [from, to], in gainScan's order, as the rows arrive: a refresh reads a
// few snapshots, the fold whole histories. The projects and the range of
// times are a range of the snapshot table's sort key.
func (h *History) readSnapshots(ctx context.Context, projects []int64, from, to uint32, each func(scannedRow)) error {
	pt, err := chconn.ProjectsExt("scanned", projects)
	if err != nil {
		return err
	}
	q := fmt.Sprintf(`SELECT project_id, message_id, toUInt32(snapshot_at), version, read_count, total, schedule
FROM %s
WHERE %s AND snapshot_at >= %s AND snapshot_at <= %s
ORDER BY project_id, message_id, snapshot_at, version`, h.names.Table(schema.SnapshotsTable.Name()), h.names.InExt("project_id", "scanned"),
		chconn.DateTime(from), chconn.DateTime(to))
	rows, err := h.conn.Query(chconn.WithExternal(ctx, pt), q)
	if err != nil {
		return fmt.Errorf("read snapshots from %s to %s: %w", sink.Time(from), sink.Time(to), err)
	}
	defer rows.Close()
	for rows.Next() {
		var r scannedRow
		if err := rows.Scan(&r.key.project, &r.key.message, &r.row.at, &r.row.version, &r.row.reads, &r.row.total, &r.schedule); err != nil {
			return fmt.Errorf("read snapshots: %w", err)
		}
		each(r)
	}
	return rows.Err()
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
	cond := h.names.InExt("project_id", "wanted_projects") + " AND " + h.names.InExt("project_id, message_id", "wanted")
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
		out = append(out, gainRowOf(t, sums[t], schedules[t], ticks))
	}
	return out, nil
}

// tickRecordSkew bounds how much earlier than its tick a run record may
// say it started: a record is written at or after its tick (a pass when
// it starts, a skipped or missed tick when it is found), and both times
// come from the clock of the process that writes it; an hour leaves room
// for any imprecision. sync_runs is sorted by the start, so reading the
// records started from an interval's start, less this, reads the ticks
// of the interval and what was recorded since, not the whole table: an
// hour of records more, where a day of them was most of what a steady
// pass's refresh read.
const tickRecordSkew = 3600

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
			"SELECT DISTINCT toUInt32(snapshot_at) AS tick FROM %s WHERE started_at >= %s AND trigger = 'cron' AND schedule = %s AND snapshot_at > %s AND snapshot_at < %s ORDER BY tick",
			h.names.Table(schema.RunsTable.Name()), chconn.DateTime(sp.lo-min(sp.lo, tickRecordSkew)), chconn.QuoteString(s), chconn.DateTime(sp.lo), chconn.DateTime(sp.hi)))
		if err != nil {
			return nil, fmt.Errorf("read the ticks of schedule %q: %w", s, err)
		}
		out[s] = ts
	}
	return out, nil
}
