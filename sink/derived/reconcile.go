package derived

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// Reconciling: the derived rows (the day rollup, the gains and the day
// gains) are refreshed after each write, but a process killed between an
// INSERT and its refresh, a refresh that read a replica behind its peer,
// a process of an earlier release, or rows inserted by hand leave some
// stale. The reconcile refreshes every project snapshot the server
// recorded as changed (package schema's changes.go), wherever the change
// came from, so that after it every view is again a function of the
// stored history.
//
// It works in steps. A step reads at most a bounded number of changes
// after the position the step before recorded in the reconciles table,
// in the order of the change logs' keys (change time, then project and
// snapshot, or schedule and tick), refreshes what they touched and
// records its own position: each change is read once, any backlog drains
// a step at a time in memory bounded by the step, and a kill loses at
// most the step it interrupts.
//
// A step reads only the changes older than its horizon, the server's
// time less the settle delay: a change becomes visible to readers a
// little after its time, when its INSERT block is written (on one
// server), or once the replica read has fetched it (in cluster mode,
// where no replica more than staleReplicaDelay behind is read). Before
// the horizon, every change of a second is visible, and the position can
// move over it for good.

// DefaultStepChanges is how many project snapshot changes, and apart how
// many tick changes, a step reads at most.
const DefaultStepChanges = 5000

// settleDelay is how long after its time a change is sure to be visible
// on the server it was written to: its INSERT block has been written.
const settleDelay = 10 * time.Second

// staleReplicaDelay is the replication delay beyond which a reconcile
// does not read a replica, in seconds.
const staleReplicaDelay = 300

// legacyOverlap is how far before its changes_to the next reconcile read
// again after a reconcile of release 0.4.0, which kept no exact position.
const legacyOverlap = 15 * time.Minute

// Lease is how long after a daemon's step the other daemons leave the
// steps to it: one process drains a backlog, and another takes over
// within Lease when it stops. It is History.Lease unless WithLease gave
// New another.
const Lease = 2 * time.Minute

// Position is where a reconcile has read the change logs up to: the last
// snapshot change and the last tick change read, by the logs' keys. A
// log's zero position is before its first change.
type Position struct {
	Snapshots SnapshotChange
	Ticks     TickChange
}

// SnapshotChange is a key of the snapshot change log. Open marks a
// position before every change of its second (one from release 0.4.0's
// record, or the start).
type SnapshotChange struct {
	ChangedAt  uint32
	Project    int64
	SnapshotAt uint32
	Open       bool
}

// TickChange is a key of the tick change log; Open as in SnapshotChange.
type TickChange struct {
	ChangedAt uint32
	Schedule  string
	Tick      uint32
	Open      bool
}

// after renders the condition that a change log's row comes after the
// key (at, then the rest), with rest the condition on the same second.
func after(at uint32, open bool, rest string) string {
	if open {
		return "changed_at >= " + chconn.DateTime(at)
	}
	// Each side of the OR is a range of the log's sort key, which the
	// server narrows: the second reads the granules after the position in
	// its second, however many changes that second holds (one INSERT …
	// SELECT records them all in one).
	return fmt.Sprintf("(changed_at > %s OR (changed_at = %s AND (%s)))", chconn.DateTime(at), chconn.DateTime(at), rest)
}

func (k SnapshotChange) after() string {
	return after(k.ChangedAt, k.Open, fmt.Sprintf("project_id > %d OR (project_id = %d AND snapshot_at > %s)", k.Project, k.Project, chconn.DateTime(k.SnapshotAt)))
}

func (k TickChange) after() string {
	return after(k.ChangedAt, k.Open, fmt.Sprintf("schedule > %s OR (schedule = %s AND tick > %s)",
		chconn.QuoteString(k.Schedule), chconn.QuoteString(k.Schedule), chconn.DateTime(k.Tick)))
}

// reach bounds the change times a step reads a change log in.
type reach struct {
	// first is a time no change in the log is older than (0: unknown).
	first uint32
	// now is the server's time when the step began: the windows widen up
	// to it, and the one that holds it reads on to the horizon, past which
	// the log holds seconds of changes at most.
	now uint32
	// horizon is the change time the step reads changes before.
	horizon uint32
}

// afterRanges renders, in the log's key order, the ranges of keys after a
// position at the change time at (its second's rest: sameSecond, or the
// whole second when open), then windows of change times that widen from
// a minute to the horizon. A step reads them in turn until it has its
// changes: each read sorts what its range holds, so a range must hold
// about a step's changes, not every change that waits (one INSERT …
// SELECT records millions in a few seconds). The windows widen from the
// log's oldest change when the position is long before it (the start, on
// a new database), whose seconds hold nothing to read.
func afterRanges(at uint32, open bool, sameSecond []string, r reach) []string {
	var out []string
	lo := at
	if r.first > 0 && r.first-1 > at {
		lo = r.first - 1
	} else if at < r.horizon {
		if open {
			out = append(out, "changed_at = "+chconn.DateTime(at))
		} else {
			for _, s := range sameSecond {
				out = append(out, fmt.Sprintf("changed_at = %s AND %s", chconn.DateTime(at), s))
			}
		}
	}
	from, end := lo, min(r.horizon, r.now)
	for _, span := range []uint32{60, 3600, 86400, 16 * 86400, 0} {
		if lo >= r.horizon {
			break
		}
		hi := r.horizon
		if span != 0 && from < end-min(end, span) {
			hi = from + span
		}
		out = append(out, fmt.Sprintf("changed_at > %s AND changed_at <= %s", chconn.DateTime(lo), chconn.DateTime(hi)))
		lo = hi
	}
	return out
}

func (k SnapshotChange) ranges(r reach) []string {
	return afterRanges(k.ChangedAt, k.Open, []string{
		fmt.Sprintf("project_id = %d AND snapshot_at > %s", k.Project, chconn.DateTime(k.SnapshotAt)),
		fmt.Sprintf("project_id > %d", k.Project),
	}, r)
}

func (k TickChange) ranges(r reach) []string {
	return afterRanges(k.ChangedAt, k.Open, []string{
		fmt.Sprintf("schedule = %s AND tick > %s", chconn.QuoteString(k.Schedule), chconn.DateTime(k.Tick)),
		"schedule > " + chconn.QuoteString(k.Schedule),
	}, r)
}

// StepReport says what a reconcile step found and did.
type StepReport struct {
	// From and To are the positions before and after the step.
	From, To Position
	// Horizon is the change time before which the step read changes.
	Horizon time.Time
	// ChangedSnapshots and ChangedTicks are the project snapshot changes
	// and the tick changes the step read.
	ChangedSnapshots, ChangedTicks int
	// Refreshed counts the project snapshots whose derived rows were
	// computed again: those changed, the later ones whose previous rows
	// changed, and those whose interval holds a tick recorded late.
	Refreshed int
	// Rewritten counts the gains rows written because the stored ones
	// were not current: 0 when every refresh after a write had landed.
	Rewritten int
	// LeftToWriters counts the changed project snapshots the step left
	// alone, their writers having refreshed them (refreshes.go).
	LeftToWriters int
	// CaughtUp says that no change older than the horizon waits.
	CaughtUp bool
	// Reached is the change time before which every change has been
	// read: the horizon once caught up. A step that left the work to
	// another daemon (HeldBy) reports the horizon too, without reading.
	Reached time.Time
	// Pending counts the change log rows after To, older than the
	// horizon or not, up to PendingCap per log.
	Pending uint64
	// HeldBy names the daemon process whose step, within the lease
	// (History.Lease), made this one leave the work to it; empty when the
	// step ran.
	HeldBy string
	// ReadRows and ReadBytes are what the server read for the step, as
	// it reported them.
	ReadRows, ReadBytes uint64
}

// ReconcileReport says what a whole reconcile, its steps added up, found
// and did.
type ReconcileReport struct {
	// From is the change time the first step started from, To the
	// horizon of the last step that recorded its position; Reconcile
	// read the changes younger than To too, without recording them.
	From, To time.Time
	// Steps counts the steps.
	Steps int
	// ChangedSnapshots, ChangedTicks, Refreshed, Rewritten,
	// LeftToWriters, ReadRows and ReadBytes add up the steps' (see
	// StepReport).
	ChangedSnapshots, ChangedTicks, Refreshed, Rewritten, LeftToWriters int
	ReadRows, ReadBytes                                                 uint64
}

func (r *ReconcileReport) add(s StepReport) {
	r.Steps++
	r.ChangedSnapshots += s.ChangedSnapshots
	r.ChangedTicks += s.ChangedTicks
	r.Refreshed += s.Refreshed
	r.Rewritten += s.Rewritten
	r.LeftToWriters += s.LeftToWriters
	r.ReadRows += s.ReadRows
	r.ReadBytes += s.ReadBytes
}

// Reconcile reads every change recorded up to now and refreshes what
// they touched, a step at a time: what a one-off command (a backfill, a
// spool replay) runs before it exits, whatever a daemon does beside it.
// The steps up to the horizon record their position; the changes after
// it, too young to be sure that none of their second is missing, are
// refreshed as well but not recorded, so that the daemon's next step
// reads them again once settled.
func (h *History) Reconcile(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	for {
		s, err := h.ReconcileStep(ctx, "", DefaultStepChanges)
		rep.add(s)
		if rep.Steps == 1 {
			rep.From = sink.Time(s.From.Snapshots.ChangedAt).Time()
		}
		if err != nil {
			return rep, err
		}
		rep.To = s.Horizon
		if s.CaughtUp {
			break
		}
	}
	pos, err := h.position(ctx)
	if err != nil {
		return rep, h.conn.Redact(err)
	}
	for {
		var now uint32
		if err := h.conn.QueryRow(ctx, "SELECT toUInt32(now())").Scan(&now); err != nil {
			return rep, h.conn.Redact(fmt.Errorf("reconcile: read the server's time: %w", err))
		}
		sctx, reads := sink.CountReads(h.readFreshReplicas(ctx))
		s, err := h.step(sctx, pos, now, math.MaxUint32, DefaultStepChanges)
		s.ReadRows, s.ReadBytes = reads.Rows(), reads.Bytes()
		rep.add(s)
		if err != nil {
			return rep, h.conn.Redact(fmt.Errorf("reconcile the changes of the last %s: %w", h.Settle(), err))
		}
		if s.CaughtUp {
			return rep, nil
		}
		pos = s.To
	}
}

// ReconcileStep runs one step (see above) and records it, as owner: a
// daemon process's name, or empty for a one-off command. A daemon leaves
// the step to another daemon whose step the reconciles table records
// within the lease (History.Lease; HeldBy says whose); a one-off command
// always runs it.
// Concurrent steps, in this process or others, are safe: a refresh of
// what is current writes nothing that changes a view.
func (h *History) ReconcileStep(ctx context.Context, owner string, limit int) (StepReport, error) {
	h.reconcileMu.Lock()
	defer h.reconcileMu.Unlock()
	ctx, reads := sink.CountReads(h.readFreshReplicas(ctx))
	rep, err := h.reconcileStep(ctx, owner, limit)
	rep.ReadRows, rep.ReadBytes = reads.Rows(), reads.Bytes()
	return rep, h.conn.Redact(err)
}

func (h *History) reconcileStep(ctx context.Context, owner string, limit int) (StepReport, error) {
	start := time.Now()
	var rep StepReport
	var now uint32 // the server's: daemons compare their steps' times by it
	if err := h.conn.QueryRow(ctx, "SELECT toUInt32(now())").Scan(&now); err != nil {
		return rep, fmt.Errorf("reconcile: read the server's time: %w", err)
	}
	pos, err := h.position(ctx)
	if err != nil {
		return rep, err
	}
	horizon := now - uint32(h.Settle()/time.Second)
	if owner != "" {
		var idle bool
		if rep.HeldBy, idle, err = h.claim(ctx, owner, now, pos); rep.HeldBy != "" || idle || err != nil {
			rep.From, rep.To, rep.CaughtUp = pos, pos, idle
			rep.Horizon, rep.Reached = sink.Time(horizon).Time(), sink.Time(horizon).Time()
			return rep, err
		}
	}
	rep, err = h.step(ctx, pos, now, horizon, limit)
	if err != nil {
		return rep, err
	}
	if rep.Pending, err = h.pending(ctx, rep.To); err != nil {
		return rep, err
	}
	if rep.ChangedSnapshots+rep.ChangedTicks == 0 {
		return rep, nil // nothing read: the recorded position stands
	}
	if err := h.recordStep(ctx, rep, owner, now, time.Since(start)); err != nil {
		return rep, err
	}
	return rep, nil
}

// step reads at most limit changes of each log after pos and before
// horizon, and refreshes what they touched but what their writers
// refreshed (refreshes.go). now is the server's time.
func (h *History) step(ctx context.Context, pos Position, now, horizon uint32, limit int) (StepReport, error) {
	rep := StepReport{From: pos, To: pos, Horizon: sink.Time(horizon).Time()}
	first, err := h.firstChanges(ctx, pos)
	if err != nil {
		return rep, err
	}
	changes, err := h.readSnapshotChanges(ctx, &rep, reach{first: first[schema.SnapshotChanges], now: now, horizon: horizon}, limit)
	if err != nil {
		return rep, err
	}
	snapsDone := len(changes) < limit
	left, judged, err := h.leftToWriters(ctx, changes, horizon)
	if err != nil {
		return rep, err
	}
	rep.Reached = rep.Horizon
	if judged < len(changes) {
		// A writer's refresh done too recently to judge: the step stops
		// before its change, and a step once it has settled reads it.
		rep.Reached = sink.Time(changes[judged].ChangedAt).Time()
		rep.To.Snapshots = pos.Snapshots
		if judged > 0 {
			rep.To.Snapshots = changes[judged-1]
		}
		changes, snapsDone = changes[:judged], true
	}
	rep.ChangedSnapshots = len(changes)
	changed, refreshed := chconn.SnapshotSet{}, chconn.SnapshotSet{}
	for _, c := range changes {
		if left[c] {
			refreshed.Add(c.Project, c.SnapshotAt)
		} else {
			changed.Add(c.Project, c.SnapshotAt)
		}
	}
	for p, ats := range changed {
		for at := range ats {
			delete(refreshed[p], at)
		}
	}
	rep.LeftToWriters = refreshed.Len()
	ticks, err := h.readTickChanges(ctx, &rep, reach{first: first[schema.TickChanges], now: now, horizon: horizon}, limit)
	if err != nil {
		return rep, err
	}
	ticksDone := rep.ChangedTicks < limit
	rep.CaughtUp = snapsDone && ticksDone
	if !snapsDone {
		rep.Reached = sink.Time(rep.To.Snapshots.ChangedAt).Time()
	}
	if t := sink.Time(rep.To.Ticks.ChangedAt).Time(); !ticksDone && t.Before(rep.Reached) {
		rep.Reached = t
	}
	across, err := h.intervalsAcross(ctx, ticks)
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	recomputed := chconn.SnapshotSet{}
	recomputed.AddAll(changed)
	recomputed.AddAll(across)
	err = h.recomputing(ctx, newRefreshID(), recomputed.Projects(), func() error {
		res, err := h.refreshSets(ctx, changed, across)
		rep.Refreshed, rep.Rewritten = res.targets, res.rewritten
		if err != nil {
			return err
		}
		return h.refillAges(ctx, changed)
	})
	if err != nil {
		return rep, fmt.Errorf("reconcile %d changed project snapshots: %w", rep.ChangedSnapshots, err)
	}
	return rep, nil
}

// readSnapshotChanges reads at most limit project snapshot changes after
// rep.To.Snapshots and before horizon, in order, moving rep.To.Snapshots
// to the last.
func (h *History) readSnapshotChanges(ctx context.Context, rep *StepReport, within reach, limit int) ([]SnapshotChange, error) {
	var changes []SnapshotChange
	horizon := within.horizon
	for _, r := range rep.To.Snapshots.ranges(within) {
		if len(changes) >= limit {
			break
		}
		q := fmt.Sprintf(`SELECT DISTINCT toUInt32(changed_at) AS c, project_id, toUInt32(snapshot_at) AS s FROM %s
WHERE %s AND changed_at < %s
ORDER BY c, project_id, s
LIMIT %d`, h.names.Table(schema.SnapshotChanges), r, chconn.DateTime(horizon), limit-len(changes))
		err := chconn.QueryEach(ctx, h.conn, q, func(rows driver.Rows) error {
			var k SnapshotChange
			if err := rows.Scan(&k.ChangedAt, &k.Project, &k.SnapshotAt); err != nil {
				return err
			}
			rep.To.Snapshots = k
			changes = append(changes, k)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reconcile: read %s: %w", schema.SnapshotChanges, err)
		}
	}
	return changes, nil
}

// readTickChanges reads at most limit tick changes after rep.To.Ticks and
// before horizon, moving rep.To.Ticks to the last; it returns each
// schedule's ticks, sorted.
func (h *History) readTickChanges(ctx context.Context, rep *StepReport, within reach, limit int) (map[string][]uint32, error) {
	ticks := map[string][]uint32{}
	horizon := within.horizon
	for _, r := range rep.To.Ticks.ranges(within) {
		if rep.ChangedTicks >= limit {
			break
		}
		q := fmt.Sprintf(`SELECT DISTINCT toUInt32(changed_at) AS c, schedule, toUInt32(tick) AS t FROM %s
WHERE %s AND changed_at < %s
ORDER BY c, schedule, t
LIMIT %d`, h.names.Table(schema.TickChanges), r, chconn.DateTime(horizon), limit-rep.ChangedTicks)
		err := chconn.QueryEach(ctx, h.conn, q, func(rows driver.Rows) error {
			var k TickChange
			if err := rows.Scan(&k.ChangedAt, &k.Schedule, &k.Tick); err != nil {
				return err
			}
			rep.To.Ticks = k
			ticks[k.Schedule] = append(ticks[k.Schedule], k.Tick)
			rep.ChangedTicks++
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reconcile: read %s: %w", schema.TickChanges, err)
		}
	}
	for _, ts := range ticks {
		slices.Sort(ts)
	}
	return ticks, nil
}

// firstChanges returns, by table name, a time no change in a change log
// is older than, for each log whose position is the start (no step
// recorded one: a new database), so that the step's first read starts
// there rather than walking empty windows from 1970: the oldest change
// time of the log's parts (the server keeps each part's bounds of the
// partition key), and at most the time before which every change is
// visible (History.Settle), which bounds an empty log. A log with a
// recorded position, or a cluster's (whose other shards' parts
// system.parts does not show), gets no entry: its windows widen from
// the position, as before.
func (h *History) firstChanges(ctx context.Context, pos Position) (map[string]uint32, error) {
	var quoted []string
	if pos.Snapshots.ChangedAt == 0 {
		quoted = append(quoted, chconn.QuoteString(schema.SnapshotChanges))
	}
	if pos.Ticks.ChangedAt == 0 {
		quoted = append(quoted, chconn.QuoteString(schema.TickChanges))
	}
	if len(quoted) == 0 || h.names.Clustered() {
		return map[string]uint32{}, nil
	}
	tables := strings.Join(quoted, ", ")
	q := fmt.Sprintf(`SELECT t, toUInt32(min(at)) FROM (
    SELECT table AS t, min_time AS at FROM system.parts WHERE active AND database = %s AND table IN (%s) AND rows > 0
    UNION ALL
    SELECT arrayJoin([%s]) AS t, now() - %d AS at
) GROUP BY t`, chconn.QuoteString(h.names.Database()), tables, tables, int64(h.Settle()/time.Second))
	first, err := chconn.QueryMap[string, uint32](ctx, h.conn, q)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read the oldest change from system.parts: %w", err)
	}
	return first, nil
}

// FirstUnread returns, for each change log with changes the reconcile
// has not read, the time of the first of them: a partition of the log
// whose every change is older has been read, and expiry may drop it
// (package expiry holds the others). It reads the granules after the
// position, as a step does.
func (h *History) FirstUnread(ctx context.Context) (map[string]time.Time, error) {
	pos, err := h.position(ctx)
	if err != nil {
		return nil, h.conn.Redact(err)
	}
	out := map[string]time.Time{}
	for log, after := range map[string]string{schema.SnapshotChanges: pos.Snapshots.after(), schema.TickChanges: pos.Ticks.after()} {
		var (
			first uint32
			n     uint64
		)
		q := fmt.Sprintf("SELECT toUInt32(min(changed_at)), count() FROM %s WHERE %s", h.names.Table(log), after)
		if err := h.conn.QueryRow(ctx, q).Scan(&first, &n); err != nil {
			return nil, h.conn.Redact(fmt.Errorf("reconcile: read the first unread change of %s: %w", log, err))
		}
		if n > 0 {
			out[log] = sink.Time(first).Time()
		}
	}
	return out, nil
}

// position returns where the recorded steps have read up to: the
// furthest position a step recorded in each log, or, before the first
// step of this release, legacyOverlap before the last reconcile of
// release 0.4.0, or the start.
func (h *History) position(ctx context.Context) (Position, error) {
	// The latest steps hold the furthest position: the records of the
	// last day are read first, older ones only when it has none, so that
	// the read does not grow with the steps recorded.
	for _, span := range []uint32{86400, 16 * 86400, 0} {
		where := ""
		if span != 0 {
			where = fmt.Sprintf("WHERE started_at >= now() - %d", span)
		}
		pos, found, err := h.positionIn(ctx, where)
		if err != nil || found {
			return pos, err
		}
	}
	return Position{Snapshots: SnapshotChange{Open: true}, Ticks: TickChange{Open: true}}, nil
}

// positionIn returns the furthest position the steps that where selects
// recorded, and whether there are any.
func (h *History) positionIn(ctx context.Context, where string) (Position, bool, error) {
	pos := Position{Snapshots: SnapshotChange{Open: true}, Ticks: TickChange{Open: true}}
	table := h.names.Table(schema.Reconciles)
	legacy := func(changesTo uint32) uint32 {
		if overlap := uint32(legacyOverlap / time.Second); changesTo > overlap {
			return changesTo - overlap
		}
		return 0
	}
	found := false
	q := `SELECT keyset, toUInt32(changes_to), cursor_project_id, toUInt32(cursor_snapshot_at) FROM ` + table + ` ` + where + `
ORDER BY keyset DESC, changes_to DESC, cursor_project_id DESC, cursor_snapshot_at DESC LIMIT 1`
	err := chconn.QueryEach(ctx, h.conn, q, func(rows driver.Rows) error {
		var keyset uint8
		k := &pos.Snapshots
		if err := rows.Scan(&keyset, &k.ChangedAt, &k.Project, &k.SnapshotAt); err != nil {
			return err
		}
		found = true
		if k.Open = keyset == 0; k.Open {
			*k = SnapshotChange{ChangedAt: legacy(k.ChangedAt), Open: true}
		}
		return nil
	})
	if err != nil || !found {
		return pos, false, wrapPosition(err)
	}
	q = `SELECT keyset, toUInt32(tick_changes_to), tick_cursor_schedule, toUInt32(tick_cursor_tick), toUInt32(changes_to) FROM ` + table + ` ` + where + `
ORDER BY keyset DESC, tick_changes_to DESC, tick_cursor_schedule DESC, tick_cursor_tick DESC, changes_to DESC LIMIT 1`
	err = chconn.QueryEach(ctx, h.conn, q, func(rows driver.Rows) error {
		var (
			keyset    uint8
			changesTo uint32
		)
		k := &pos.Ticks
		if err := rows.Scan(&keyset, &k.ChangedAt, &k.Schedule, &k.Tick, &changesTo); err != nil {
			return err
		}
		if k.Open = keyset == 0; k.Open {
			*k = TickChange{ChangedAt: legacy(changesTo), Open: true}
		}
		return nil
	})
	return pos, true, wrapPosition(err)
}

func wrapPosition(err error) error {
	if err != nil {
		return fmt.Errorf("reconcile: read the position in %s: %w", schema.Reconciles, err)
	}
	return nil
}

// claim returns the daemon that holds the steps, empty when it is owner:
// the one that recorded the latest step within the lease (History.Lease).
// A daemon that does not hold them but finds nobody does records a step
// that reads nothing at pos and asks again, so that of several daemons
// starting together, or outliving the holder together, one takes the
// steps; it claims them only when changes wait after pos (idle says none
// did).
func (h *History) claim(ctx context.Context, owner string, now uint32, pos Position) (holder string, idle bool, err error) {
	for claimed := false; ; claimed = true {
		holder, at, err := h.lastDaemonStep(ctx)
		switch {
		case err != nil:
			return "", false, err
		case holder == owner:
			return "", false, nil
		case holder != "" && int64(now)-int64(at) < int64(h.Lease()/time.Second):
			return holder, false, nil
		case claimed:
			// The claim is not read back (a replica behind): run the step,
			// which costs no more than a step run twice.
			return "", false, nil
		}
		if n, err := h.pending(ctx, pos); err != nil || n == 0 {
			return "", err == nil, err
		}
		if err := h.recordStep(ctx, StepReport{From: pos, To: pos}, owner, now, 0); err != nil {
			return "", false, err
		}
		// Claims made meanwhile by others are read back too.
		select {
		case <-ctx.Done():
			return "", false, context.Cause(ctx)
		case <-time.After(claimWait):
		}
	}
}

// claimWait is how long a daemon that claims the steps waits to read the
// claims of the others: of those that land within it, one wins.
const claimWait = time.Second

// lastDaemonStep returns the daemon that recorded the latest step, and
// the server's time when that step started.
func (h *History) lastDaemonStep(ctx context.Context) (owner string, at uint32, err error) {
	// Ties broken by name, so that every daemon names the same one.
	// Only a step within a day can hold the work: a read of that day.
	q := "SELECT owner, toUInt32(started_at) FROM " + h.names.Table(schema.Reconciles) +
		" WHERE started_at >= now() - 86400 AND keyset = 1 AND owner != '' ORDER BY started_at DESC, owner DESC LIMIT 1"
	err = chconn.QueryEach(ctx, h.conn, q, func(rows driver.Rows) error { return rows.Scan(&owner, &at) })
	if err != nil {
		return "", 0, fmt.Errorf("reconcile: read the latest step in %s: %w", schema.Reconciles, err)
	}
	return owner, at, nil
}

// PendingCap is how many change log rows after a position the reconcile
// counts at most, per log: the count costs a few steps' reads of the log
// however long the backlog, which readsync_reconcile_reached_timestamp_seconds
// measures in time. A count at the cap means at least that many wait.
const PendingCap = 4 * DefaultStepChanges

// pending counts the change log rows after pos, up to PendingCap per log.
// The server stops reading at the limit: blocks of a fine granule keep
// what it reads past it to a granule.
func (h *History) pending(ctx context.Context, pos Position) (uint64, error) {
	var n uint64
	q := fmt.Sprintf(`SELECT (SELECT count() FROM (SELECT 1 FROM %s WHERE %s LIMIT %d)) + (SELECT count() FROM (SELECT 1 FROM %s WHERE %s LIMIT %d))
SETTINGS max_block_size = %d`,
		h.names.Table(schema.SnapshotChanges), pos.Snapshots.after(), PendingCap, h.names.Table(schema.TickChanges), pos.Ticks.after(), PendingCap,
		schema.FineGranularity)
	if err := h.conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("reconcile: count the changes that wait: %w", err)
	}
	return n, nil
}

// recordStep records a step's position and what it did in the
// reconciles table.
func (h *History) recordStep(ctx context.Context, rep StepReport, owner string, started uint32, d time.Duration) error {
	q := "INSERT INTO " + h.names.Table(schema.Reconciles) + ` (started_at, changes_from, changes_to, changed_snapshots, changed_ticks,
 refreshed_snapshots, rewritten_gains, duration_ms, keyset, cursor_project_id, cursor_snapshot_at, tick_changes_to, tick_cursor_schedule,
 tick_cursor_tick, owner, pending_changes)`
	s, t := rep.To.Snapshots, rep.To.Ticks
	err := h.conn.InsertRow(h.conn.SyncInserts(ctx), q, sink.Time(started).Time(), sink.Time(rep.From.Snapshots.ChangedAt).Time(), sink.Time(s.ChangedAt).Time(),
		uint64(rep.ChangedSnapshots), uint64(rep.ChangedTicks), uint64(rep.Refreshed), uint64(rep.Rewritten), uint64(d.Milliseconds()),
		uint8(1), s.Project, sink.Time(s.SnapshotAt).Time(), sink.Time(t.ChangedAt).Time(), t.Schedule, sink.Time(t.Tick).Time(), owner, rep.Pending)
	if err != nil {
		return fmt.Errorf("reconcile: record the step in %s: %w", schema.Reconciles, err)
	}
	return nil
}

// Lease is how long after a daemon's step the other daemons leave the
// steps to it: Lease, or what WithLease gave New.
func (h *History) Lease() time.Duration {
	if h.lease > 0 {
		return h.lease
	}
	return Lease
}

// Settle is how long after its time a step waits to read a change (see
// above): settleDelay on one server, and staleReplicaDelay more in
// cluster mode; or what WithSettle gave New.
func (h *History) Settle() time.Duration {
	switch {
	case h.settle > 0:
		return h.settle
	case h.names.Clustered():
		return settleDelay + staleReplicaDelay*time.Second
	default:
		return settleDelay
	}
}

// intervalsAcross returns the project snapshots whose gains interval, by
// the current gains rows, holds one of ticks (per schedule, sorted): their
// missed ticks may have changed.
func (h *History) intervalsAcross(ctx context.Context, ticks map[string][]uint32) (chconn.SnapshotSet, error) {
	out := chconn.SnapshotSet{}
	if len(ticks) == 0 {
		return out, nil
	}
	first := uint32(0)
	for _, ts := range ticks {
		if first == 0 || ts[0] < first {
			first = ts[0]
		}
	}
	q := fmt.Sprintf(`SELECT project_id, toUInt32(snapshot_at), tupleElement(w, 1), toUInt32(tupleElement(w, 2))
FROM
(
    SELECT project_id, snapshot_at, argMax((gain_schedule, gain_prev_at), gain_key) AS w
    FROM %s
    WHERE snapshot_at > %s
    GROUP BY project_id, snapshot_at
)`, h.names.Table(schema.GainsRollup), chconn.DateTime(first))
	err := chconn.QueryEach(ctx, h.conn, q, func(rows driver.Rows) error {
		var (
			t        gainTarget
			schedule string
			prevAt   uint32
		)
		if err := rows.Scan(&t.project, &t.at, &schedule, &prevAt); err != nil {
			return err
		}
		ts := ticks[schedule]
		if prevAt == 0 || len(ts) == 0 {
			return nil
		}
		if i, _ := slices.BinarySearch(ts, prevAt+1); i < len(ts) && ts[i] < t.at {
			out.Add(t.project, t.at)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find the intervals across %d recorded ticks: %w", len(ticks), err)
	}
	return out, nil
}

// readFreshReplicas makes the reads of ctx skip a replica more than
// staleReplicaDelay seconds behind, failing rather than reading one when
// every replica of a shard is: a reconcile that read stale rows would
// record that it had read the changes. On one server it changes nothing.
func (h *History) readFreshReplicas(ctx context.Context) context.Context {
	if !h.names.Clustered() {
		return ctx
	}
	return chconn.WithSettings(ctx, clickhouse.Settings{
		"max_replica_delay_for_distributed_queries":          staleReplicaDelay,
		"fallback_to_stale_replicas_for_distributed_queries": 0,
	})
}

// refreshResult says what a refresh did.
type refreshResult struct {
	targets, rewritten int
}
