package derived

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// Repair mends what a check found (package verify): it writes again each
// of views, those that differ from their brute force, from its current
// definition (a view altered by hand), and rebuilds from the stored
// history every derived row of projects, those with a row that differs. A refresh cannot mend every kind of
// difference, since a rollup keeps the highest key or the maximum it was
// given: a row written there by hand may outrank every refresh. So the
// project's rows are deleted from every rollup, then computed again:
// those the materialized views keep from the snapshot rows, the day
// rollup from those, the gains from the snapshot rows.
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

// repairChunk is how many projects one deletion names: a mutation cannot
// take external data, so their ids are in its text, which this bounds.
const repairChunk = 1000

// derivedTables are the rollups Repair rebuilds, materialized views' first.
func derivedTables() []string {
	return []string{schema.LatestRollup, schema.DailyRollup, schema.SnapshotRollup, schema.FirstRollup, schema.DayRollup, schema.GainsRollup, schema.DayGainsRollup}
}

// rebuild deletes projects' rows from every rollup and computes them
// again from the stored history.
func (h *History) rebuild(ctx context.Context, projects []int64) error {
	ctx = h.conn.SyncInserts(ctx)
	list := joinInts(projects)
	for _, t := range derivedTables() {
		q := fmt.Sprintf("ALTER TABLE %s%s DELETE WHERE project_id IN (%s)", h.names.Local(t), h.names.OnCluster(), list)
		if err := h.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("delete from %s: %w", t, err)
		}
		if err := h.awaitMutations(ctx, t); err != nil {
			return err
		}
	}
	pt, err := chconn.ProjectsExt("rebuilt", projects)
	if err != nil {
		return err
	}
	where := "WHERE " + chconn.InExt("project_id", "rebuilt")
	for _, r := range schema.Refills(h.names, where) {
		if err := h.conn.Exec(chconn.WithExternal(ctx, pt), r.Insert); err != nil {
			return fmt.Errorf("refill %s: %w", r.Rollup, err)
		}
	}
	if err := h.conn.Exec(chconn.WithExternal(ctx, pt), schema.DayRefresh(h.names, where)); err != nil {
		return fmt.Errorf("refill %s: %w", schema.DayRollup, err)
	}
	return h.foldGainsOf(ctx, projects)
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
