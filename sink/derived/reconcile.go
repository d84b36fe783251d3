package derived

import (
	"context"
	"fmt"
	"slices"
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
// stale. Reconcile refreshes every project snapshot the server recorded
// as changed (package schema's changes.go) since the last reconcile,
// wherever the change came from, so that after it every view is again a
// function of the stored history. readsync runs it after every pass and
// when the daemon starts.
//
// Its cost is bounded by what changed, not by the history: a pass's own
// writes (whose refresh it repeats, writing nothing when the rows are
// current) and the few other changes. Each reconcile records the time up
// to which it read the changes; the next one reads from there, less
// reconcileOverlap, so that a change made visible late is still read: an
// INSERT in flight when the reconcile started, or rows that reached a
// replica late.

// reconcileOverlap is how far before the previous reconcile's end the
// next one reads the changes again. In cluster mode a reconcile reads no
// replica more than staleReplicaDelay behind its peers (see
// readFreshReplicas), so a change becomes visible to it within that delay
// of its time.
const reconcileOverlap = 15 * time.Minute

// staleReplicaDelay is the replication delay beyond which a reconcile
// does not read a replica, in seconds.
const staleReplicaDelay = 300

// ReconcileReport says what a reconcile found and did.
type ReconcileReport struct {
	// From and To bound the times of the changes read.
	From, To time.Time
	// ChangedSnapshots and ChangedTicks are the project snapshots written
	// and the cron ticks recorded in that span.
	ChangedSnapshots, ChangedTicks int
	// Refreshed counts the project snapshots whose derived rows were
	// computed again: those changed, the later ones whose previous rows
	// changed, and those whose interval holds a tick recorded late.
	Refreshed int
	// Rewritten counts the gains rows written because the stored ones
	// were not current: 0 when every refresh after a write had landed.
	Rewritten int
}

// Reconcile refreshes the derived rows of every project snapshot changed
// since the last reconcile (see above), and records that it did.
// Concurrent calls, in this process or others, are safe: a refresh of
// what is current writes nothing that changes a view.
func (h *History) Reconcile(ctx context.Context) (ReconcileReport, error) {
	h.reconcileMu.Lock()
	defer h.reconcileMu.Unlock()
	rep, err := h.reconcileChanges(h.readFreshReplicas(ctx))
	return rep, h.conn.Redact(err)
}

// reconcileChanges does Reconcile's work: it reads the changes recorded
// since the last reconcile, refreshes what they touched, and records that
// it did.
func (h *History) reconcileChanges(ctx context.Context) (ReconcileReport, error) {
	start := time.Now()
	var rep ReconcileReport
	var now, last uint32
	if err := h.conn.QueryRow(ctx, "SELECT toUInt32(now())").Scan(&now); err != nil {
		return rep, fmt.Errorf("reconcile: read the server's time: %w", err)
	}
	if err := h.conn.QueryRow(ctx, "SELECT toUInt32(max(changes_to)) FROM "+h.names.Table(schema.Reconciles)).Scan(&last); err != nil {
		return rep, fmt.Errorf("reconcile: read the last reconcile: %w", err)
	}
	from := uint32(0)
	if overlap := uint32(reconcileOverlap / time.Second); last > overlap {
		from = last - overlap
	}
	rep.From, rep.To = sink.Time(from).Time(), sink.Time(now).Time()
	changed := chconn.SnapshotSet{}
	err := chconn.QueryEach(ctx, h.conn, fmt.Sprintf("SELECT DISTINCT project_id, toUInt32(snapshot_at) FROM %s WHERE changed_at >= %s",
		h.names.Table(schema.SnapshotChanges), chconn.DateTime(from)), func(rows driver.Rows) error {
		var t gainTarget
		if err := rows.Scan(&t.project, &t.at); err != nil {
			return err
		}
		changed.Add(t.project, t.at)
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("reconcile: read %s: %w", schema.SnapshotChanges, err)
	}
	ticks := map[string][]uint32{}
	err = chconn.QueryEach(ctx, h.conn, fmt.Sprintf("SELECT DISTINCT schedule, toUInt32(tick) AS t FROM %s WHERE changed_at >= %s ORDER BY schedule, t",
		h.names.Table(schema.TickChanges), chconn.DateTime(from)), func(rows driver.Rows) error {
		var (
			s string
			t uint32
		)
		if err := rows.Scan(&s, &t); err != nil {
			return err
		}
		ticks[s] = append(ticks[s], t)
		rep.ChangedTicks++
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("reconcile: read %s: %w", schema.TickChanges, err)
	}
	rep.ChangedSnapshots = changed.Len()
	across, err := h.intervalsAcross(ctx, ticks)
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	res, err := h.refreshSets(ctx, changed, across)
	rep.Refreshed, rep.Rewritten = res.targets, res.rewritten
	if err != nil {
		return rep, fmt.Errorf("reconcile %d changed project snapshots: %w", rep.ChangedSnapshots, err)
	}
	d := time.Since(start)
	q := "INSERT INTO " + h.names.Table(schema.Reconciles) + " (started_at, changes_from, changes_to, changed_snapshots, changed_ticks, refreshed_snapshots, rewritten_gains, duration_ms)"
	err = h.conn.InsertRow(h.conn.SyncInserts(ctx), q, start.UTC(), rep.From, rep.To, uint64(rep.ChangedSnapshots), uint64(rep.ChangedTicks),
		uint64(rep.Refreshed), uint64(rep.Rewritten), uint64(d.Milliseconds()))
	if err != nil {
		return rep, fmt.Errorf("reconcile: record it in %s: %w", schema.Reconciles, err)
	}
	return rep, nil
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
