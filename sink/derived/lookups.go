package derived

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// The lookups a refresh makes around the project snapshots it computes:
// the snapshot before and after each, each message's newest row before
// and first row after. Each reads a range of a table's sort key around
// the time it starts from, widening the range only for what it has not
// found yet, so that what a refresh reads follows what changed and not
// the history stored: a message seen a minute ago is found in the first
// range, one listed again after months in a later one.

// probeSpans are the spans, in seconds, a lookup reads in turn from the
// time it starts from, each for what the spans before did not find; 0,
// the last, is unbounded.
var probeSpans = []uint32{3600, 86400, 16 * 86400, 256 * 86400, 0}

// previousSnapshotSpan is how far back previousSnapshots looks: beyond,
// the messages are looked up one by one, as after a long outage.
const previousSnapshotSpan = 7 * 86400

// previousSnapshots returns each project's latest snapshot before t, if it
// has one in the previousSnapshotSpan before, from the snapshot rollup.
func (h *History) previousSnapshots(ctx context.Context, projects []int64, t uint32) (map[int64]uint32, error) {
	out, err := h.nearestSnapshots(ctx, projects, []uint32{3600, 86400, previousSnapshotSpan}, func(span uint32) string {
		return fmt.Sprintf("snapshot_at >= %s AND snapshot_at < %s", chconn.DateTime(t-min(t, span)), chconn.DateTime(t))
	}, "max")
	if err != nil {
		return nil, fmt.Errorf("read projects' previous snapshots: %w", err)
	}
	return out, nil
}

// nextSnapshots returns each project's first snapshot after t, for those
// that have one, from the snapshot rollup.
func (h *History) nextSnapshots(ctx context.Context, projects []int64, t uint32) (map[int64]uint32, error) {
	out, err := h.nearestSnapshots(ctx, projects, probeSpans, func(span uint32) string {
		return "snapshot_at > " + chconn.DateTime(t) + spanEnd(t, span)
	}, "min")
	if err != nil {
		return nil, fmt.Errorf("read projects' next snapshots: %w", err)
	}
	return out, nil
}

// nearestSnapshots returns, for each project that has one, the snapshot
// the aggregate agg (max or min) picks from the snapshot rollup's rows
// within the range of each span in turn, for the projects the spans
// before did not find.
func (h *History) nearestSnapshots(ctx context.Context, projects []int64, spans []uint32, within func(span uint32) string, agg string) (map[int64]uint32, error) {
	out := map[int64]uint32{}
	left := projects
	for _, span := range spans {
		if len(left) == 0 {
			break
		}
		pt, err := chconn.ProjectsExt("nearest", left)
		if err != nil {
			return nil, err
		}
		q := fmt.Sprintf("SELECT project_id, toUInt32(%s(snapshot_at)) FROM %s WHERE %s AND %s GROUP BY project_id",
			agg, h.names.Table(schema.SnapshotRollup), h.names.InExt("project_id", "nearest"), within(span))
		found, err := chconn.QueryMap[int64, uint32](chconn.WithExternal(ctx, pt), h.conn, q)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, found)
		left = slices.DeleteFunc(slices.Clone(left), func(p int64) bool { _, ok := out[p]; return ok })
	}
	return out, nil
}

// spanEnd is the condition that a snapshot is at most span after t, empty
// for an unbounded span.
func spanEnd(t, span uint32) string {
	if span == 0 || t > ^uint32(0)-span {
		return ""
	}
	return " AND snapshot_at <= " + chconn.DateTime(t+span)
}

// projectsSeenBefore returns which of projects have a snapshot before t:
// those with a message first seen before t, which the first-seen rollup
// holds in a row per message.
func (h *History) projectsSeenBefore(ctx context.Context, projects []int64, t uint32) (map[int64]bool, error) {
	out := map[int64]bool{}
	if len(projects) == 0 {
		return out, nil
	}
	pt, err := chconn.ProjectsExt("dormant", projects)
	if err != nil {
		return nil, err
	}
	seen, err := chconn.QueryColumn[int64](chconn.WithExternal(ctx, pt), h.conn, fmt.Sprintf(`SELECT DISTINCT project_id
FROM
(
    SELECT project_id, message_id, minMerge(first_seen) AS first
    FROM %s
    WHERE %s
    GROUP BY project_id, message_id
)
WHERE first < %s`, h.names.Table(schema.FirstRollup), h.names.InExt("project_id", "dormant"), chconn.DateTime(t)))
	if err != nil {
		return nil, fmt.Errorf("look for projects' earlier snapshots: %w", err)
	}
	for _, p := range seen {
		out[p] = true
	}
	return out, nil
}

// priorRows returns the newest row of each message at each project's
// snapshot in prev: what the messages listed there count their gains at
// the next snapshot from.
func (h *History) priorRows(ctx context.Context, prev map[int64]uint32) (map[msgKey]snapRow, error) {
	out := map[msgKey]snapRow{}
	if len(prev) == 0 {
		return out, nil
	}
	set := chconn.SnapshotSet{}
	for p, at := range prev {
		set.Add(p, at)
	}
	tables, cond, err := h.names.SnapshotsIn("previous", set)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf("SELECT project_id, message_id, toUInt32(snapshot_at), version, read_count, total FROM %s WHERE %s",
		h.names.Table(schema.SnapshotsTable.Name()), cond)
	err = chconn.QueryEach(chconn.WithExternal(ctx, tables...), h.conn, q, func(rows driver.Rows) error {
		var (
			k msgKey
			r snapRow
		)
		if err := rows.Scan(&k.project, &k.message, &r.at, &r.version, &r.reads, &r.total); err != nil {
			return err
		}
		if old, ok := out[k]; !ok || r.version > old.version {
			out[k] = r
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the rows of projects' previous snapshots: %w", err)
	}
	return out, nil
}

// loadPriors puts into priors the newest row before from of each message
// in want seen before from: first those of from's day, from the snapshot
// table, then those of the days before, from the daily rollup, a widening
// range of days at a time. Messages first seen from from on have none.
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
	steps := []struct{ agg, table, where string }{
		{"max(" + schema.SnapshotRow + ")", schema.SnapshotsTable.Name(), fmt.Sprintf("snapshot_at >= %s AND snapshot_at < %s", chconn.DateTime(day), chconn.DateTime(from))},
	}
	for _, span := range probeSpans {
		where := "day < " + chconn.QuoteDate(sink.Time(day).Time())
		if span != 0 && day > span {
			where += " AND day >= " + chconn.QuoteDate(sink.Time(day-span).Time())
		}
		steps = append(steps, struct{ agg, table, where string }{"maxMerge(day_row)", schema.DailyRollup, where})
	}
	for _, step := range steps {
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

// latestOfMessages returns the time of each message's latest snapshot, of
// the messages of projects, from the latest-value rollup: a row per
// message, whatever the history.
func (h *History) latestOfMessages(ctx context.Context, projects []int64) (map[msgKey]uint32, error) {
	pt, err := chconn.ProjectsExt("latest_of", projects)
	if err != nil {
		return nil, err
	}
	out := map[msgKey]uint32{}
	q := fmt.Sprintf(`SELECT project_id, message_id, %s FROM
(
    SELECT project_id, message_id, maxMerge(latest_row) AS message_row
    FROM %s
    WHERE %s
    GROUP BY project_id, message_id
)`, schema.RowUInt64("message_row", schema.RowSnapshotAt), h.names.Table(schema.LatestRollup), h.names.InExt("project_id", "latest_of"))
	err = chconn.QueryEach(chconn.WithExternal(ctx, pt), h.conn, q, func(rows driver.Rows) error {
		var (
			k  msgKey
			at uint64
		)
		if err := rows.Scan(&k.project, &k.message, &at); err != nil {
			return err
		}
		out[k] = uint32(at)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read messages' latest snapshots: %w", err)
	}
	return out, nil
}

// firstRowsAfter returns the time of each message of want's first row
// after t, for those that have one, a widening range at a time.
func (h *History) firstRowsAfter(ctx context.Context, want map[msgKey]bool, t uint32) (map[msgKey]uint32, error) {
	out := map[msgKey]uint32{}
	left := maps.Clone(want)
	for _, span := range probeSpans {
		if len(left) == 0 {
			break
		}
		q := fmt.Sprintf("SELECT project_id, message_id, toUInt32(min(snapshot_at)) FROM %s WHERE snapshot_at > %s%s AND %%s GROUP BY project_id, message_id",
			h.names.Table(schema.SnapshotsTable.Name()), chconn.DateTime(t), spanEnd(t, span))
		err := h.queryIn(ctx, left, q, func(rows driver.Rows) error {
			var (
				k  msgKey
				at uint32
			)
			if err := rows.Scan(&k.project, &k.message, &at); err != nil {
				return err
			}
			out[k] = at
			delete(left, k)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read messages' next rows after %s: %w", sink.Time(t), err)
		}
	}
	return out, nil
}
