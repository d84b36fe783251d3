package derived

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// The speeds of the messages a write added to, carried forward: each
// message's new speed row is computed from its previous one and the
// snapshots the write added (carrySpeed), which reads one row a message
// instead of its curve (73 rows and one a day of age). A row carries what
// that needs (package schema's SpeedTable). The computation is in Go, not
// SQL: it walks each message's written snapshots in order, bucket by
// bucket, and gives up where the row cannot decide, which a table test
// pins rule by rule; in SQL it would be an array fold in two dialects,
// and a second statement to find the messages it gave up on.
//
// A message that had no snapshot before the write (Prepare found no
// latest row of it) has no row to read: its curve is what the write
// added, and its row is computed from that alone (firstSpeed), so that a
// pass of new messages, a first backfill, reads nothing here. On 18.16,
// computing them from their curves took the server about a second for a
// batch of 25 000 new messages.
//
// A message whose row cannot decide is computed again from its whole
// curve (schema.SpeedRefill), as the reconcile does: a message without a
// row (one whose earlier refresh failed, or whose project was not read
// before the write), a snapshot older than the row's latest (a write out
// of order, a backfill), a latest count whose share's bound falls (a
// bucket before the share's may reach the lower bound), a share
// whose bound a bucket between the share's and the latest reaches (the
// row holds their most reads, not which one reaches first), a create_at
// that changed, and a row that did not see the message's latest snapshot
// before the write (Prepared's; a write whose refresh failed, whose
// change the reconcile has yet to recompute). Reading only the needed ages
// of such a curve would read the same granules of the age rollup (1 024
// rows each, the curves of about ten messages): it reads the whole curve.
//
// A row read before a recomputation of its project (a reconcile step
// that added snapshots older than its latest) wrote its own misses what
// that one added, and the carried row, of a higher version, would hide
// it: the write's refresh looks for such a recomputation once it has
// carried, and computes those messages again from their curves
// (refreshRaced).

// agedRow is a snapshot row of a write with its message's create_at:
// what FillAges added to the age rollup.
type agedRow struct {
	project, message int64
	created, at      uint32
	version, reads   uint64
}

func (a agedRow) compare(b agedRow) int {
	return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.message, b.message), cmp.Compare(a.at, b.at),
		cmp.Compare(a.version, b.version), cmp.Compare(a.reads, b.reads))
}

// Aged is what a write added to the age rollup (FillAges): its snapshot
// rows that have an age, sorted by message and snapshot, with their
// messages' create_at. The refresh of the write carries the speeds of
// their messages forward from it. Nil holds nothing.
type Aged struct {
	rows []agedRow
}

// refreshSpeeds computes the speed rollup's rows of the messages aged
// added to (see above): from their previous rows where those decide,
// from their curves otherwise. prepared (nil for nothing) is what the
// write read before it. It is part of the refresh after a write: when it
// fails, the write's changes are left to the reconcile, which computes
// the speeds again from the curves (refillAges). It returns the messages
// whose rows it carried forward, which a recomputation racing the write
// may have made wrong (refreshRaced).
func (h *History) refreshSpeeds(ctx context.Context, aged *Aged, prepared *Prepared) ([]msgKey, error) {
	if aged == nil || len(aged.rows) == 0 {
		return nil, nil
	}
	// A message that had no snapshot before the write (Prepare read its
	// project and found no latest row) has no speed row to read: a pass
	// of new messages reads nothing here.
	var messages []msgKey
	for i, a := range aged.rows {
		k := msgKey{a.project, a.message}
		if (i == 0 || k != (msgKey{aged.rows[i-1].project, aged.rows[i-1].message})) && !prepared.isNew(k) {
			messages = append(messages, k)
		}
	}
	var prev []schema.SpeedRow
	if len(messages) > 0 {
		var err error
		if prev, err = h.readSpeeds(ctx, messages); err != nil {
			return nil, err
		}
	}
	// The rows computed here are computed again as the INSERT sends them
	// (and, on a server that takes tokens, as its token is computed), a
	// block at a time: the process holds, beside the rows read, where
	// each one's snapshots are, not a batch of rows.
	type computed struct {
		lo, hi int32 // the message's rows of aged
		prev   int32 // its row in prev, -1 for its first
	}
	var (
		plan         []computed
		keys, curves []msgKey
		j, firstRows int
	)
	for lo := 0; lo < len(aged.rows); {
		k := msgKey{aged.rows[lo].project, aged.rows[lo].message}
		hi := lo + 1
		for hi < len(aged.rows) && aged.rows[hi].project == k.project && aged.rows[hi].message == k.message {
			hi++
		}
		written := aged.rows[lo:hi]
		c := computed{lo: int32(lo), hi: int32(hi), prev: -1}
		lo = hi
		for j < len(prev) && speedKey(prev[j]).compare(k) < 0 {
			j++
		}
		ok := j < len(prev) && speedKey(prev[j]) == k
		before, read, found := prepared.latestRow(k)
		if ok && found && (before.at != prev[j].LatestAt || before.version != prev[j].LatestVersion) {
			// The row must have seen the message's latest snapshot before
			// the write, or it misses what a write whose refresh failed
			// added.
			ok = false
		}
		switch {
		case ok:
			c.prev = int32(j)
			_, ok = carrySpeed(prev[j], written)
		case read && !found:
			// New: Prepare read its project and found no row of it.
			_, ok = firstSpeed(written)
			if ok {
				firstRows++
			}
		}
		if ok {
			plan = append(plan, c)
			keys = append(keys, k)
		} else {
			curves = append(curves, k)
		}
	}
	h.conn.Log().Debug("speeds refreshed", "carried", len(plan)-firstRows, "first", firstRows, "from_curves", len(curves))
	rows := func(yield func(*schema.SpeedRow) bool) {
		for _, c := range plan {
			written := aged.rows[c.lo:c.hi]
			var r schema.SpeedRow
			if c.prev < 0 {
				r, _ = firstSpeed(written)
			} else {
				r, _ = carrySpeed(prev[c.prev], written)
			}
			if !yield(&r) {
				return
			}
		}
	}
	if err := chconn.InsertSeq(ctx, h.conn, schema.SpeedTable, nil, len(plan), rows); err != nil {
		return nil, h.conn.Redact(fmt.Errorf("store the %s rows of %d messages carried forward: %w", schema.SpeedRollup, len(plan), err))
	}
	return keys, h.speedsFromCurves(ctx, curves)
}

// readSpeeds reads the speed rollup's rows of messages, sorted by
// message: a slice, not a map, so that a pass's peak memory stays near
// its batch's.
func (h *History) readSpeeds(ctx context.Context, messages []msgKey) ([]schema.SpeedRow, error) {
	t, lo, hi, err := messagesExt("sped", messages)
	if err != nil {
		return nil, err
	}
	out := make([]schema.SpeedRow, 0, len(messages))
	// The range narrows the read on 18.16, which narrows nothing by an
	// IN of an external table.
	q := schema.SpeedRows(h.names, fmt.Sprintf("project_id BETWEEN %d AND %d AND %s", lo, hi, h.names.InExt("project_id, message_id", "sped")))
	err = chconn.QueryEach(chconn.WithExternal(ctx, t), h.conn, q, func(rows driver.Rows) error {
		var (
			r                 schema.SpeedRow
			created, latestAt time.Time
		)
		if err := rows.Scan(&r.ProjectID, &r.MessageID, &created, &r.FirstSeenAgeHours,
			&r.ReadsAt[0], &r.ReadsAt[1], &r.ReadsAt[2], &r.ReadsAt[3], &r.ReadsAt[4], &r.LatestReads, &r.Share24h,
			&r.Shares[0].AfterMin, &r.Shares[0].AfterMax, &r.Shares[1].AfterMin, &r.Shares[1].AfterMax, &r.Version,
			&r.FirstAge, &r.LatestAge, &latestAt, &r.LatestVersion,
			&r.Shares[0].Age, &r.Shares[0].Reads, &r.Shares[0].Between, &r.Shares[1].Age, &r.Shares[1].Reads, &r.Shares[1].Between); err != nil {
			return err
		}
		r.CreateAt, r.LatestAt = uint32(created.Unix()), uint32(latestAt.Unix())
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, h.conn.Redact(fmt.Errorf("read the %s rows of %d messages: %w", schema.SpeedRollup, len(messages), err))
	}
	slices.SortFunc(out, func(a, b schema.SpeedRow) int { return speedKey(a).compare(speedKey(b)) })
	return out, nil
}

// speedKey is the message of a speed row.
func speedKey(r schema.SpeedRow) msgKey { return msgKey{r.ProjectID, r.MessageID} }

// speedsFromCurves computes the speed rollup's rows of messages from
// their whole curves in the age rollup, read by the sort key; a message
// without age rows gets no row.
func (h *History) speedsFromCurves(ctx context.Context, messages []msgKey) error {
	if len(messages) == 0 {
		return nil
	}
	t, lo, hi, err := messagesExt("sped", messages)
	if err != nil {
		return err
	}
	q := schema.SpeedRefill(h.names, fmt.Sprintf("project_id BETWEEN %d AND %d AND %s", lo, hi, h.names.InExt("project_id, message_id", "sped")))
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), t), q); err != nil {
		return h.conn.Redact(fmt.Errorf("refresh the %s rows of %d messages from their curves: %w", schema.SpeedRollup, len(messages), err))
	}
	return nil
}

// messagesExt is the external table name of messages (project_id,
// message_id), and the range of their projects.
func messagesExt(name string, messages []msgKey) (*chconn.ExtTable, int64, int64, error) {
	t, err := chconn.NewExtTable(name, "project_id", "Int64", "message_id", "Int64")
	if err != nil {
		return nil, 0, 0, err
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, k := range messages {
		if err := t.Append(k.project, k.message); err != nil {
			return nil, 0, 0, err
		}
		lo, hi = min(lo, k.project), max(hi, k.project)
	}
	return t, lo, hi, nil
}

// latestRow returns message k's latest row as Prepare read it; read
// says whether Prepare read k's project, found whether it found a row of
// k there (none: k had no snapshot before the write).
func (p *Prepared) latestRow(k msgKey) (row snapRow, read, found bool) {
	if p == nil {
		return snapRow{}, false, false
	}
	rows, read := p.latestOf(k.project)
	i, found := slices.BinarySearchFunc(rows, k.message, func(r msgRow, m int64) int { return cmp.Compare(r.message, m) })
	if !found {
		return snapRow{}, read, false
	}
	return rows[i].snapRow, read, true
}

// isNew reports whether Prepare read message k's project and found no
// latest row of k: k had no snapshot before the write.
func (p *Prepared) isNew(k msgKey) bool {
	_, read, found := p.latestRow(k)
	return read && !found
}

// carrySpeed returns the speed row of a message after the snapshot rows
// written (sorted by agedRow.compare) were added to its curve, computed
// from its row before them, r, alone; false where r cannot decide it (see
// above). The values are those of speedValues over the whole curve
// (package schema's age.go): the reads at a fixed age are the latest
// bucket's at or before it; a share is first reached by the first bucket
// whose reads reach the bound, ⌈latest × share⌉.
func carrySpeed(r schema.SpeedRow, written []agedRow) (schema.SpeedRow, bool) {
	for _, w := range written {
		if w.created != r.CreateAt {
			return r, false
		}
		switch c := cmp.Or(cmp.Compare(w.at, r.LatestAt), cmp.Compare(w.version, r.LatestVersion)); {
		case c < 0:
			return r, false
		case c == 0:
			// The latest row, written again: the bucket keeps the row
			// of the most reads.
			if w.reads != r.LatestReads {
				return r, false
			}
			continue
		}
		b := schema.AgeBucket(w.created, w.at)
		if b < r.LatestAge {
			return r, false
		}
		before, beforeAge, added := r.LatestReads, r.LatestAge, b > r.LatestAge
		// The version is the highest of the buckets' rows; a row the new
		// one replaces in the latest bucket leaves the others'.
		switch {
		case added || w.version >= r.Version:
			r.Version = max(r.Version, w.version)
		case r.Version == r.LatestVersion:
			// The highest may have been the replaced row's alone.
			return r, false
		}
		for i, h := range schema.SpeedAges {
			switch {
			case h == b:
				r.ReadsAt[i] = ptr(w.reads)
			case added && h > beforeAge && h < b:
				r.ReadsAt[i] = ptr(before)
			}
		}
		for s := range r.Shares {
			sh := &r.Shares[s]
			bound := schema.SpeedShareBound(s, w.reads)
			switch {
			case bound < schema.SpeedShareBound(s, before):
				// A bucket before the share's may reach the lower bound.
				return r, false
			case sh.Age == beforeAge && !added:
				// The share's bucket is the latest: it holds the new
				// reads, which reach every share.
				sh.Reads = w.reads
			case sh.Age == beforeAge:
				if before < bound {
					sh.Age, sh.Reads = b, w.reads
				}
				sh.Between = 0
			case sh.Reads >= bound:
				if added {
					sh.Between = max(sh.Between, before)
				}
			case sh.Between >= bound:
				return r, false
			case added && before >= bound:
				sh.Age, sh.Reads, sh.Between = beforeAge, before, 0
			default:
				sh.Age, sh.Reads, sh.Between = b, w.reads, 0
			}
		}
		r.LatestReads, r.LatestAge, r.LatestAt, r.LatestVersion = w.reads, b, w.at, w.version
	}
	r.Share24h = nil
	if r.LatestReads > 0 && r.ReadsAt[2] != nil {
		r.Share24h = ptr(float64(*r.ReadsAt[2]) / float64(r.LatestReads))
	}
	for s := range r.Shares {
		sh := &r.Shares[s]
		sh.AfterMin, sh.AfterMax = nil, nil
		if r.LatestReads == 0 {
			continue
		}
		sh.AfterMax = ptr(sh.Age)
		if sh.Age != r.FirstAge {
			sh.AfterMin = ptr(schema.GridBefore(sh.Age))
		}
	}
	return r, true
}

// firstSpeed returns the speed row of a message whose whole curve is the
// snapshot rows written (sorted by agedRow.compare), a message's first
// write: the row of the first alone, carried over the rest; false where
// carrySpeed cannot decide it.
func firstSpeed(written []agedRow) (schema.SpeedRow, bool) {
	w := written[0]
	b := schema.AgeBucket(w.created, w.at)
	r := schema.SpeedRow{ProjectID: w.project, MessageID: w.message, CreateAt: w.created,
		FirstAge: b, LatestAge: b, LatestAt: w.at, LatestVersion: w.version, LatestReads: w.reads, Version: w.version}
	if w.at > w.created {
		r.FirstSeenAgeHours = (w.at - w.created) / 3600
	}
	for i, h := range schema.SpeedAges {
		if h == b {
			r.ReadsAt[i] = ptr(w.reads)
		}
	}
	for s := range r.Shares {
		r.Shares[s].Age, r.Shares[s].Reads = b, w.reads
	}
	return carrySpeed(r, written[1:])
}

func ptr[T any](v T) *T { return &v }

// sortAged sorts rows by agedRow.compare.
func sortAged(rows []agedRow) { slices.SortFunc(rows, agedRow.compare) }

func (k msgKey) compare(o msgKey) int {
	return cmp.Or(cmp.Compare(k.project, o.project), cmp.Compare(k.message, o.message))
}
