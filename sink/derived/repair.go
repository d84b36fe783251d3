package derived

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/expiry"
	"github.com/readsync/readsync/sink/schema"
)

// Repair mends what a check found (package verify): it writes again each
// of views, those that differ from their brute force, from its current
// definition (a view altered by hand), and rebuilds from the stored
// history every derived row of projects, those with a row that differs. A refresh cannot mend every kind of
// difference, since a rollup keeps the highest key or the maximum it was
// given: a row written there by hand may outrank every refresh. So the
// project's rows are deleted from every rollup (deleteRows: marked
// deleted where the server can, so that no other project's rows are
// written again), then computed again: those the materialized views keep
// from the snapshot rows, the day rollup from those, the gains from the
// snapshot rows.
//
// It works a chunk of projects at a time; readers may see a chunk's rows
// missing for the moment between the deletion and the rebuild.
func (h *History) Repair(ctx context.Context, views []string, projects []int64) error {
	for _, v := range views {
		for _, q := range schema.RewriteView(h.names, v) {
			if err := h.conn.Exec(ctx, q); err != nil {
				return h.conn.Redact(fmt.Errorf("repair: write view %s again: %w", v, err))
			}
		}
	}
	if slices.Contains(views, schema.NameHealthView) {
		if err := h.rebuildNameFailureHours(ctx); err != nil {
			return h.conn.Redact(fmt.Errorf("repair: rebuild %s: %w", schema.NameFailureHours, err))
		}
	}
	all := slices.Compact(slices.Sorted(slices.Values(projects)))
	for len(all) > 0 {
		n := min(len(all), repairChunk)
		if err := h.rebuild(ctx, all[:n]); err != nil {
			return h.conn.Redact(fmt.Errorf("repair: rebuild the derived rows of projects %d to %d: %w", all[0], all[n-1], err))
		}
		h.conn.Log().Info("rebuilt the derived rows of projects", "projects", n, "first", all[0], "last", all[n-1])
		all = all[n:]
	}
	return nil
}

// rebuildNameFailureHours deletes the hours of every name's failures that
// name_health reads (a day, or the longer span of a slow schedule's
// passes), and an hour more for the time between the check and the
// repair, and computes them again from name_failures. Readers may see
// those failures missing for the moment between.
func (h *History) rebuildNameFailureHours(ctx context.Context) error {
	ctx = h.conn.SyncInserts(ctx)
	var reach uint32
	if err := h.conn.QueryRow(ctx, schema.NameHealthReach(h.names)).Scan(&reach); err != nil {
		return fmt.Errorf("read how far back %s reads: %w", schema.NameHealthView, err)
	}
	from := chconn.DateTime(chconn.Hour.Start(chconn.Hour.Of(uint32(time.Now().Unix()) - reach - 3600)))
	if err := h.deleteRows(ctx, schema.NameFailureHours, []string{"hour >= " + from}); err != nil {
		return err
	}
	if err := h.conn.Exec(ctx, schema.NameFailureHoursRefill(h.names, "WHERE snapshot_at >= "+from)); err != nil {
		return fmt.Errorf("refill %s: %w", schema.NameFailureHours, err)
	}
	h.conn.Log().Info("rebuilt the names' failures by the hour", "table", schema.NameFailureHours, "from", from)
	return nil
}

// repairChunk is how many projects one deletion names: a mutation cannot
// take external data, so their ids are in its text, which this bounds.
const repairChunk = 1000

// derivedTables are the rollups Repair rebuilds, materialized views' first.
func derivedTables() []string {
	return []string{schema.LatestRollup, schema.DailyRollup, schema.SnapshotRollup, schema.FirstRollup, schema.DayRollup, schema.GainsRollup, schema.DayGainsRollup,
		schema.HourlyRollup, schema.HourRollup, schema.HourGainsRollup, schema.AgeRollup, schema.SpeedRollup}
}

// rebuild deletes projects' rows from every rollup and computes them
// again from the stored history.
//
// Where the raw rows expired (package expiry), the derived rows computed
// from them are kept as they are, since what remains cannot compute them:
// the days before the first whole day kept, the latest row of a message
// with no row kept, when a message with rows before the edge was first
// seen, the curve by age of such a message, the speeds of a message with
// no age row left, and the reads gained at a snapshot whose previous one
// expired. The rest is deleted and computed again from the rows from the
// edge on.
func (h *History) rebuild(ctx context.Context, projects []int64) error {
	ctx = h.conn.SyncInserts(ctx)
	edges, err := expiry.ReadEdges(ctx, h.conn)
	if err != nil {
		return err
	}
	list := joinInts(projects)
	pt, err := chconn.ProjectsExt("rebuilt", projects)
	if err != nil {
		return err
	}
	edge := uint32(edges.Raw().Unix())
	var keep keptAtEdge
	if !edges.Raw().IsZero() {
		if keep, err = h.keptAtEdge(chconn.WithExternal(ctx, pt), edge); err != nil {
			return err
		}
	} else {
		edge = 0
	}
	for _, t := range derivedTables() {
		var conds []string
		for _, cond := range keep.deletions(t, edge) {
			conds = append(conds, "project_id IN ("+list+")"+cond)
		}
		if err := h.deleteRows(ctx, t, conds); err != nil {
			return err
		}
	}
	where := "WHERE " + h.names.InExt("project_id", "rebuilt")
	if edge > 0 {
		where += " AND snapshot_at >= " + chconn.DateTime(edge)
	}
	for _, r := range schema.Refills(h.names, where) {
		if err := h.conn.Exec(chconn.WithExternal(ctx, pt), r.Insert); err != nil {
			return fmt.Errorf("refill %s: %w", r.Rollup, err)
		}
	}
	ageWhere := h.names.InExt("project_id", "rebuilt")
	if edge > 0 {
		ageWhere += " AND snapshot_at >= " + chconn.DateTime(edge)
	}
	if err := h.conn.Exec(chconn.WithExternal(ctx, pt), schema.AgeRefill(h.names, ageWhere, h.names.InExt("project_id", "rebuilt"))); err != nil {
		return fmt.Errorf("refill %s: %w", schema.AgeRollup, err)
	}
	// Every message's speed from its curve, the rows kept where the raw
	// rows expired included: the speed rollup derives from the age
	// rollup alone.
	if err := h.conn.Exec(chconn.WithExternal(ctx, pt), schema.SpeedRefill(h.names, h.names.InExt("project_id", "rebuilt"))); err != nil {
		return fmt.Errorf("refill %s: %w", schema.SpeedRollup, err)
	}
	dayWhere := "WHERE " + h.names.InExt("project_id", "rebuilt")
	if edge > 0 {
		dayWhere += " AND day >= " + chconn.QuoteDate(edges.RawDay())
	}
	if err := h.conn.Exec(chconn.WithExternal(ctx, pt), schema.DayRefresh(h.names, dayWhere)); err != nil {
		return fmt.Errorf("refill %s: %w", schema.DayRollup, err)
	}
	hourWhere := "WHERE " + h.names.InExt("project_id", "rebuilt")
	if edge > 0 {
		hourWhere += " AND hour >= " + chconn.DateTime(chconn.Hour.Start(chconn.Hour.Of(edge+3599)))
	}
	if err := h.conn.Exec(chconn.WithExternal(ctx, pt), schema.HourRefresh(h.names, hourWhere)); err != nil {
		return fmt.Errorf("refill %s: %w", schema.HourRollup, err)
	}
	if err := h.foldGainsOf(ctx, projects, keep.gains); err != nil {
		return err
	}
	return h.resetTips(ctx, projects)
}

// resetTips makes the next write of each of projects refresh from the
// stored history: its tip may have been built on the rows the repair
// found wrong, and a tip with a higher key than the one the fold wrote
// would outlast it. The reset outranks every tip of the project's newest
// snapshot; the refresh from the stored history writes the next tip at a
// newer one.
func (h *History) resetTips(ctx context.Context, projects []int64) error {
	if !h.tipped() {
		return nil
	}
	latest, err := h.latestOfMessages(ctx, projects)
	if err != nil {
		return err
	}
	resets := map[int64]string{}
	for k, at := range latest {
		if t, ok := resets[k.project]; !ok || resetTip(at) > t {
			resets[k.project] = resetTip(at)
		}
	}
	return h.writeTipStrings(ctx, resets)
}

// keptAtEdge is what a rebuild of some projects keeps where the raw rows
// expired: the messages whose latest and first-seen rows it computes
// again (the others keep theirs), and the snapshots whose gains it keeps.
type keptAtEdge struct {
	// latest are the messages with a row kept; first those first seen
	// from the edge on; curves those with a row in the age rollup, whose
	// speeds a rebuild computes again (the speed rollup never expires:
	// the row of a message whose every age row expired is kept).
	latest, first, curves []msgKey
	gains                 chconn.SnapshotSet
}

// keptAtEdge reads what a rebuild of the projects of ctx's external table
// "rebuilt" keeps, the raw rows before edge having expired.
func (h *History) keptAtEdge(ctx context.Context, edge uint32) (keptAtEdge, error) {
	k := keptAtEdge{gains: chconn.SnapshotSet{}}
	snapshots := h.names.Table(schema.SnapshotsTable.Name())
	in := h.names.InExt("project_id", "rebuilt")
	var err error
	if k.latest, err = h.messagesOf(ctx, snapshots, in); err != nil {
		return k, fmt.Errorf("read the messages with rows kept: %w", err)
	}
	if k.curves, err = h.messagesOf(ctx, h.names.Table(schema.AgeRollup), in); err != nil {
		return k, fmt.Errorf("read the messages with a curve kept: %w", err)
	}
	// A message seen before the edge: its first snapshot kept is one whose
	// gains were computed from its row before, which expired.
	q := fmt.Sprintf(`SELECT project_id, message_id, toUInt32(first), toUInt32(first_kept)
FROM
(
    SELECT project_id, message_id, minMerge(first_seen) AS first
    FROM %s
    WHERE %s
    GROUP BY project_id, message_id
) AS seen
ANY LEFT JOIN
(
    SELECT project_id, message_id, min(snapshot_at) AS first_kept
    FROM %s
    WHERE %s
    GROUP BY project_id, message_id
) AS kept USING (project_id, message_id)
ORDER BY project_id, message_id`, h.names.Table(schema.FirstRollup), in, snapshots, in)
	err = chconn.QueryEach(ctx, h.conn, q, func(rows driver.Rows) error {
		var (
			m              msgKey
			first, firstAt uint32
		)
		if err := rows.Scan(&m.project, &m.message, &first, &firstAt); err != nil {
			return err
		}
		switch {
		case first >= edge:
			k.first = append(k.first, m)
		case firstAt >= edge:
			k.gains.Add(m.project, firstAt)
		}
		return nil
	})
	if err != nil {
		return k, fmt.Errorf("read when the messages were first seen: %w", err)
	}
	return k, nil
}

// messagesOf reads the messages of table (a qualified name) whose rows
// where selects, in order.
func (h *History) messagesOf(ctx context.Context, table, where string) ([]msgKey, error) {
	var out []msgKey
	err := chconn.QueryEach(ctx, h.conn, fmt.Sprintf("SELECT DISTINCT project_id, message_id FROM %s WHERE %s ORDER BY project_id, message_id", table, where),
		func(rows driver.Rows) error {
			var m msgKey
			err := rows.Scan(&m.project, &m.message)
			out = append(out, m)
			return err
		})
	return out, err
}

// deletionTuples bounds the (project, message) pairs one deletion names:
// its text must stay within the server's max_query_size (256 KiB by
// default).
const deletionTuples = 5000

// deletions returns the conditions, after the projects', of the deletions
// from table t before its rows are computed again: one, empty, when
// nothing expired (edge 0); none when nothing of the table is computed
// again.
func (k keptAtEdge) deletions(t string, edge uint32) []string {
	if edge == 0 {
		return []string{""}
	}
	day := chconn.QuoteDate(sink.Time(chconn.DayStart(edge + 86399)).Time())
	switch t {
	case schema.LatestRollup:
		return messageConds(k.latest)
	case schema.FirstRollup, schema.AgeRollup:
		// A message's curve is computed again only where its every row
		// is kept: one first seen from the edge on.
		return messageConds(k.first)
	case schema.SpeedRollup:
		return messageConds(k.curves)
	case schema.DailyRollup, schema.DayRollup, schema.DayGainsRollup:
		return []string{" AND day >= " + day}
	case schema.HourlyRollup, schema.HourRollup, schema.HourGainsRollup:
		return []string{" AND hour >= " + chconn.DateTime(chconn.Hour.Start(chconn.Hour.Of(edge+3599)))}
	case schema.SnapshotRollup:
		return []string{" AND snapshot_at >= " + chconn.DateTime(edge)}
	case schema.GainsRollup:
		cond := " AND snapshot_at >= " + chconn.DateTime(edge)
		var kept []string
		for _, p := range k.gains.Projects() {
			for _, at := range slices.Sorted(maps.Keys(k.gains[p])) {
				kept = append(kept, fmt.Sprintf("(%d, %d)", p, at))
			}
		}
		if len(kept) > 0 {
			cond += " AND (project_id, toUInt32(snapshot_at)) NOT IN (" + strings.Join(kept, ", ") + ")"
		}
		return []string{cond}
	}
	return []string{""}
}

// messageConds returns conditions that select the messages ms, at most
// deletionTuples a condition.
func messageConds(ms []msgKey) []string {
	var out []string
	for len(ms) > 0 {
		n := min(len(ms), deletionTuples)
		parts := make([]string, n)
		for i, m := range ms[:n] {
			parts[i] = fmt.Sprintf("(%d, %d)", m.project, m.message)
		}
		out = append(out, " AND (project_id, message_id) IN ("+strings.Join(parts, ", ")+")")
		ms = ms[n:]
	}
	return out
}

// deleteRows deletes the rows of table that each of conds selects, on
// every host of a cluster, and returns once they are gone. Where the
// server marks rows deleted (chconn.Server.LightweightDeletes), each part
// that holds one gains a mask of the rows that remain and keeps the files
// of its columns: a repair writes no row of a project it does not repair.
// Elsewhere (18.16) a mutation writes each part that holds a deleted row
// again, whole, the rows of other projects in it included.
func (h *History) deleteRows(ctx context.Context, table string, conds []string) error {
	if len(conds) == 0 {
		return nil
	}
	server, err := h.conn.Server(ctx)
	if err != nil {
		return fmt.Errorf("delete from %s: %w", table, err)
	}
	stmt := "ALTER TABLE %s%s DELETE WHERE %s"
	if server.LightweightDeletes() {
		// 2: the DELETE answers once every replica has marked the rows.
		stmt = "DELETE FROM %s%s WHERE %s"
		ctx = chconn.WithSettings(ctx, clickhouse.Settings{"lightweight_deletes_sync": 2})
	}
	for _, cond := range conds {
		if err := h.conn.Exec(ctx, fmt.Sprintf(stmt, h.names.Local(table), h.names.OnCluster(), cond)); err != nil {
			return fmt.Errorf("delete from %s: %w", table, err)
		}
	}
	if server.LightweightDeletes() {
		return nil
	}
	return h.awaitMutations(ctx, table)
}

// awaitMutations waits until the server has applied every mutation of
// the table, on every host of a cluster.
func (h *History) awaitMutations(ctx context.Context, table string) error {
	mutations := "system.mutations"
	if h.names.Clustered() {
		mutations = fmt.Sprintf("cluster(%s, system, mutations)", chconn.QuoteString(h.names.Topology().Cluster))
	}
	q := fmt.Sprintf("SELECT count() FROM %s WHERE database = %s AND table = %s AND is_done = 0",
		mutations, chconn.QuoteString(h.names.Database()), chconn.QuoteString(h.names.LocalName(table)))
	for {
		var n uint64
		if err := h.conn.QueryRow(ctx, q).Scan(&n); err != nil {
			return fmt.Errorf("wait for the deletion from %s: %w", table, err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the deletion from %s: %w", table, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// joinInts writes xs as a list for IN (…).
func joinInts[T int64 | uint32](xs []T) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(int64(x), 10))
	}
	return b.String()
}
