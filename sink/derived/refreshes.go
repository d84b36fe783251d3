package derived

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// Each change refreshed once. A write's refresh (Refresh) records, once
// done, each project snapshot it refreshed with the time its reads began,
// before the write, and the time it was done; a recomputation from the
// stored history (the reconcile's, a fold's, a repair's) records, per
// project, that it starts, before it reads, and that it ended (package
// schema's tips.go). The reconcile leaves a change alone when its writer
// refreshed it:
//
//   - a refresh of its project snapshot is recorded done, whose reads
//     began before the change and that was done after it;
//   - no other change of the project was made from settleDelay before
//     those reads began until the refresh was done, but one whose own
//     writer's refresh was done before them, or whose writer's reads
//     began after it: a write that near may not have been visible to
//     them, nor they to its refresh, where of two refreshes one after the
//     other, the second saw the first's write;
//   - no recomputation of the project but the writer's own ran at any
//     time from the reads' start to the refresh's end (one that recorded
//     no end counts as running for RefreshLease after its start): it may
//     have read the derived rows the refresh built on before it wrote
//     them anew, or written them after the refresh read them;
//   - and it was done before the step's horizon, so that every change and
//     record made before is visible to the step.
//
// Of two writes of a project that could not see each other, neither is
// left alone; a write whose refresh failed, or a process killed before
// it, records nothing. A change left alone costs the step the rows of the
// records and of the change log around it, not its recomputation.

// refreshLease is how long after it starts a recomputation that recorded
// no end may still write derived rows: a reconcile step's or a write's own
// budget (Lease, two minutes), with room to spare. It is
// History.RefreshLease unless WithRefreshLease gave New another.
const refreshLease = 5 * time.Minute

// RefreshLease is how long after it starts a recomputation that recorded
// no end may still write derived rows: refreshLease, or what
// WithRefreshLease gave New.
func (h *History) RefreshLease() time.Duration {
	if h.refreshLease > 0 {
		return h.refreshLease
	}
	return refreshLease
}

// refreshSpan is how long after its change a write's refresh may be done:
// a write attempt's budget (two minutes), with room to spare.
const refreshSpan = 150 * time.Second

// doneSoon is how long after its change a write's refresh is done, most
// often: the record is looked for within it first, and within
// refreshSpan only for the changes not found there. The records of the
// writes within it are read too: a pass a minute reads its own.
const doneSoon = 3 * time.Second

// newRefreshID names one refresh in the record of refreshes.
func newRefreshID() uint64 { return rand.Uint64() }

// tipped reports whether tips and the record of refreshes are kept here:
// on one server, after migration 15. In cluster mode a read may find a
// replica behind, so every write is refreshed from the stored history and
// the reconcile recomputes every change: neither is needed.
func (h *History) tipped() bool { return !h.names.Clustered() && !h.untipped }

// recordStarts records that the recomputation id of projects from the
// stored history starts, before it reads anything.
func (h *History) recordStarts(ctx context.Context, id uint64, projects []int64) error {
	return h.recordRecomputation(ctx, schema.RefreshStarts, id, projects)
}

// recordEnds records that the recomputation id of projects ended.
func (h *History) recordEnds(ctx context.Context, id uint64, projects []int64) error {
	return h.recordRecomputation(ctx, schema.RefreshEnds, id, projects)
}

func (h *History) recordRecomputation(ctx context.Context, kind uint8, id uint64, projects []int64) error {
	if !h.tipped() || len(projects) == 0 {
		return nil
	}
	pt, err := chconn.ProjectsExt("recomputed", projects)
	if err != nil {
		return err
	}
	q := fmt.Sprintf(`INSERT INTO %s (kind, at, refresh_id, project_id, snapshot_at, read_at)
SELECT %d, now(), %d, project_id, toDateTime(0), now() FROM recomputed`, h.names.Table(schema.Refreshes), kind, id)
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), pt), q); err != nil {
		return h.conn.Redact(fmt.Errorf("record a recomputation of %d projects in %s: %w", len(projects), schema.Refreshes, err))
	}
	return nil
}

// recomputing runs f, the recomputation id of projects from the stored
// history, between the records of its start and its end.
func (h *History) recomputing(ctx context.Context, id uint64, projects []int64, f func() error) error {
	if err := h.recordStarts(ctx, id, projects); err != nil {
		return err
	}
	if err := f(); err != nil {
		return err
	}
	return h.recordEnds(ctx, id, projects)
}

// recordDone records the refresh id of the project snapshots of set,
// whose reads began at prepared's time, as done.
func (h *History) recordDone(ctx context.Context, id uint64, prepared *Prepared, set chconn.SnapshotSet) error {
	if !h.tipped() || prepared == nil || prepared.readAt == 0 || set.Len() == 0 {
		return nil
	}
	st, err := chconn.SnapshotsExt("done", set)
	if err != nil {
		return err
	}
	q := fmt.Sprintf(`INSERT INTO %s (kind, at, refresh_id, project_id, snapshot_at, read_at)
SELECT %d, now(), %d, project_id, snapshot_at, %s FROM done`, h.names.Table(schema.Refreshes), schema.RefreshDone, id, chconn.DateTime(prepared.readAt))
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), st), q); err != nil {
		return h.conn.Redact(fmt.Errorf("record a refresh of %d project snapshots in %s: %w", set.Len(), schema.Refreshes, err))
	}
	return nil
}

// refreshRecord is a row of the record of refreshes.
type refreshRecord struct {
	kind       uint8
	at, readAt uint32
	id         uint64
	project    int64
	snapshotAt uint32
}

// leftToWriters returns which of changes, read in order, their writers
// refreshed (see above), and the index of the first change whose writer's
// refresh was done too recently to judge (len(changes) when none): the
// step stops before it, and a later one judges it.
func (h *History) leftToWriters(ctx context.Context, changes []SnapshotChange, horizon uint32) (map[SnapshotChange]bool, int, error) {
	left := map[SnapshotChange]bool{}
	if !h.tipped() || len(changes) == 0 {
		return left, len(changes), nil
	}
	done, err := h.writersRefreshes(ctx, changes)
	if err != nil {
		return nil, 0, err
	}
	// The changes whose writers refreshed them, up to the first that
	// cannot be judged yet.
	judged := len(changes)
	var candidates []SnapshotChange
	for i, c := range changes {
		d, ok := done[c]
		if ok && d.at >= horizon {
			judged = i
			break
		}
		if ok {
			candidates = append(candidates, c)
		}
	}
	if len(candidates) == 0 {
		return left, judged, nil
	}
	settle := secs(h.Settle())
	projects := map[int64]bool{}
	var near, ran []timeRange
	for _, c := range candidates {
		d := done[c]
		projects[c.Project] = true
		near = append(near, timeRange{sub(d.readAt, settle), d.at})
		ran = append(ran, timeRange{sub(d.readAt, secs(h.RefreshLease())), d.at})
	}
	list := slices.Sorted(maps.Keys(projects))
	others, err := h.changesWithin(ctx, list, mergeRanges(near, maxRanges))
	if err != nil {
		return nil, 0, err
	}
	// A change near one whose writer refreshed it was visible to that
	// refresh if its own writer's refresh was done before those reads
	// began: the write before it in a sequence of passes or backfills.
	var near2 []SnapshotChange
	for _, os := range others {
		for _, o := range os {
			if _, ok := done[o]; !ok {
				near2 = append(near2, o)
			}
		}
	}
	othersDone, err := h.writersRefreshes(ctx, near2)
	if err != nil {
		return nil, 0, err
	}
	maps.Copy(othersDone, done)
	recomputations, err := h.recomputationsWithin(ctx, list, mergeRanges(ran, maxRanges))
	if err != nil {
		return nil, 0, err
	}
	for _, c := range candidates {
		d := done[c]
		clean := true
		for _, o := range others[c.Project] {
			od, refreshed := othersDone[o]
			// Written and refreshed before the reads began, or written
			// by a writer whose reads began after the refresh was done:
			// each saw the other.
			apart := refreshed && (od.at < d.readAt || od.readAt > d.at)
			if o != c && !apart && o.ChangedAt+settle >= d.readAt && o.ChangedAt <= d.at {
				clean = false
			}
		}
		for _, r := range recomputations[c.Project] {
			// The writer's own recomputation of what it wrote is its
			// refresh.
			if r.id != d.id && r.start <= d.at && r.end >= d.readAt {
				clean = false
			}
		}
		left[c] = clean
	}
	return left, judged, nil
}

// writersRefreshes returns, for each of changes that its writer
// refreshed, the record of that refresh: done, with its reads begun
// before the change and done after. It looks within doneSoon of the
// changes first, then within refreshSpan for those not found.
func (h *History) writersRefreshes(ctx context.Context, changes []SnapshotChange) (map[SnapshotChange]refreshRecord, error) {
	out := map[SnapshotChange]refreshRecord{}
	left := changes
	for _, span := range []struct{ from, to uint32 }{{0, secs(doneSoon)}, {secs(doneSoon), secs(refreshSpan)}} {
		if len(left) == 0 {
			break
		}
		projects := map[int64]bool{}
		var within []timeRange
		for _, c := range left {
			projects[c.Project] = true
			within = append(within, timeRange{c.ChangedAt + span.from, c.ChangedAt + span.to})
		}
		records, err := h.readRefreshes(ctx, schema.RefreshDone, slices.Sorted(maps.Keys(projects)), mergeRanges(within, maxRanges))
		if err != nil {
			return nil, err
		}
		var rest []SnapshotChange
		for _, c := range left {
			found := false
			for _, r := range records[c.Project] {
				if r.snapshotAt == c.SnapshotAt && r.readAt <= c.ChangedAt && r.at >= c.ChangedAt {
					out[c], found = r, true
					break
				}
			}
			if !found {
				rest = append(rest, c)
			}
		}
		left = rest
	}
	return out, nil
}

// recomputation is when a recomputation of a project ran: from its start
// to its end, or to RefreshLease after its start if it recorded none.
type recomputation struct {
	id         uint64
	start, end uint32
}

// recomputationsWithin returns, by project, the recomputations of
// projects that started or ended within ranges.
func (h *History) recomputationsWithin(ctx context.Context, projects []int64, ranges []timeRange) (map[int64][]recomputation, error) {
	starts, err := h.readRefreshes(ctx, schema.RefreshStarts, projects, ranges)
	if err != nil || len(starts) == 0 {
		return nil, err
	}
	// A recomputation that started within ranges ends at most
	// RefreshLease later.
	var ending []timeRange
	for _, r := range ranges {
		ending = append(ending, timeRange{r.lo, r.hi + secs(h.RefreshLease())})
	}
	ends, err := h.readRefreshes(ctx, schema.RefreshEnds, projects, mergeRanges(ending, maxRanges))
	if err != nil {
		return nil, err
	}
	type key struct {
		id      uint64
		project int64
	}
	endOf := map[key]uint32{}
	for p, rs := range ends {
		for _, r := range rs {
			endOf[key{r.id, p}] = r.at
		}
	}
	out := map[int64][]recomputation{}
	for p, rs := range starts {
		for _, r := range rs {
			end, ok := endOf[key{r.id, p}]
			if !ok {
				end = r.at + secs(h.RefreshLease())
			}
			out[p] = append(out[p], recomputation{r.id, r.at, end})
		}
	}
	return out, nil
}

// readRefreshes reads the records of kind of projects within ranges, by
// project.
func (h *History) readRefreshes(ctx context.Context, kind uint8, projects []int64, ranges []timeRange) (map[int64][]refreshRecord, error) {
	pt, err := chconn.ProjectsExt("judged", projects)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`SELECT kind, toUInt32(at), toUInt32(read_at), refresh_id, project_id, toUInt32(snapshot_at) FROM %s
WHERE kind = %d AND (%s) AND %s`, h.names.Table(schema.Refreshes), kind, rangesCondition("at", ranges), h.names.InExt("project_id", "judged"))
	out := map[int64][]refreshRecord{}
	err = chconn.QueryEach(chconn.WithExternal(ctx, pt), h.conn, q, func(rows driver.Rows) error {
		var r refreshRecord
		if err := rows.Scan(&r.kind, &r.at, &r.readAt, &r.id, &r.project, &r.snapshotAt); err != nil {
			return err
		}
		out[r.project] = append(out[r.project], r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: read %s: %w", schema.Refreshes, err)
	}
	return out, nil
}

// changesWithin reads the changes of projects within ranges, by project.
func (h *History) changesWithin(ctx context.Context, projects []int64, ranges []timeRange) (map[int64][]SnapshotChange, error) {
	pt, err := chconn.ProjectsExt("judged", projects)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`SELECT DISTINCT toUInt32(changed_at), project_id, toUInt32(snapshot_at) FROM %s WHERE (%s) AND %s`,
		h.names.Table(schema.SnapshotChanges), rangesCondition("changed_at", ranges), h.names.InExt("project_id", "judged"))
	out := map[int64][]SnapshotChange{}
	err = chconn.QueryEach(chconn.WithExternal(ctx, pt), h.conn, q, func(rows driver.Rows) error {
		var c SnapshotChange
		if err := rows.Scan(&c.ChangedAt, &c.Project, &c.SnapshotAt); err != nil {
			return err
		}
		out[c.Project] = append(out[c.Project], c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: read the changes around %d changed projects: %w", len(projects), err)
	}
	return out, nil
}

// timeRange is a closed range of Unix times.
type timeRange struct{ lo, hi uint32 }

// maxRanges bounds the ranges of one read's condition: its text stays
// short whatever the changes of a step.
const maxRanges = 32

// mergeRanges returns the union of rs as at most n ranges, sorted, joining
// the nearest ones first when there are more: what it adds only costs the
// rows of the gaps.
func mergeRanges(rs []timeRange, n int) []timeRange {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b timeRange) int { return cmp.Compare(a.lo, b.lo) })
	var out []timeRange
	for _, r := range rs {
		if len(out) > 0 && r.lo <= out[len(out)-1].hi+1 {
			out[len(out)-1].hi = max(out[len(out)-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	for len(out) > n {
		best := 0
		for i := 1; i+1 < len(out); i++ {
			if out[i+1].lo-out[i].hi < out[best+1].lo-out[best].hi {
				best = i
			}
		}
		out[best].hi = max(out[best].hi, out[best+1].hi)
		out = slices.Delete(out, best+1, best+2)
	}
	return out
}

// rangesCondition is the condition that col lies in one of ranges: each a
// range of the first column of the tables it reads (their change time),
// which both servers narrow a read by.
func rangesCondition(col string, ranges []timeRange) string {
	conds := make([]string, len(ranges))
	for i, r := range ranges {
		conds[i] = fmt.Sprintf("%s >= %s AND %s <= %s", col, chconn.DateTime(r.lo), col, chconn.DateTime(r.hi))
	}
	return "(" + strings.Join(conds, ") OR (") + ")"
}

// secs is d in whole seconds.
func secs(d time.Duration) uint32 { return uint32(d / time.Second) }

// sub is a - b, or 0 when b is larger.
func sub(a, b uint32) uint32 { return a - min(a, b) }
