package derived

import (
	"context"
	"fmt"
	"math"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// FillAges adds the snapshot rows of a write to the age rollup (package
// schema's age.go), each with the create_at of its message. A pass lists
// each message with its statistics, and a write holds the message of most
// of its snapshots; a long list's message rows may leave in an earlier
// batch than its snapshot rows (they wait on disk until the list has
// arrived whole), and the create_at of those is read from the messages
// table, by the key of each. A snapshot whose message is nowhere, or whose
// create_at is unusable (the Unix epoch), has no age. The rows go to the
// server as external data; the rollup keeps a maximum, so a write sent
// again adds nothing new.
//
// A snapshot whose message's row is written only after it (a batch of
// message rows spooled while a later one with their snapshots got
// through) has no age until --repair rebuilds its project's curves:
// --verify reports the rows it lacks.
func (h *History) FillAges(ctx context.Context, messages []sink.Message, snapshots []sink.Snapshot) error {
	if len(snapshots) == 0 {
		return nil
	}
	created := make(map[msgKey]sink.Time, len(messages))
	for _, m := range messages {
		// The message rows of a write are of one pass: one create_at each.
		created[msgKey{m.ProjectID, m.ID}] = m.CreateAt
	}
	if err := h.readCreated(ctx, snapshots, created); err != nil {
		return err
	}
	t, err := chconn.NewExtTable("aged", schema.AgeExtColumns...)
	if err != nil {
		return err
	}
	rows := 0
	for _, s := range snapshots {
		c := created[msgKey{s.ProjectID, s.MessageID}]
		if c == 0 {
			continue
		}
		if err := t.Append(s.ProjectID, s.MessageID, c.Time(), s.SnapshotAt.Time(), s.Version, s.ReadCount, s.Total, s.Percent); err != nil {
			return err
		}
		rows++
	}
	if rows == 0 {
		return nil
	}
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), t), schema.AgeFill(h.names, "aged")); err != nil {
		return h.conn.Redact(fmt.Errorf("add %d snapshot rows to %s: %w", rows, schema.AgeRollup, err))
	}
	return nil
}

// refreshSpeeds computes again the speed rollup's rows of the messages of
// the written snapshots, from their curves in the age rollup (package
// schema's speed.go), which FillAges added to: the rows of those
// messages only, read by the sort key; a message without age rows (no
// usable create_at) gets no row. A message's curve is all of its age
// rows, 73 and one a day of age, so what this reads grows with the age of
// the messages written (bounded by the daily retention, which drops a
// curve's oldest rows), not with the history of anything else. It is
// part of the refresh after a write: when it fails, the write's changes
// are left to the reconcile, which computes the speeds again (refillAges).
func (h *History) refreshSpeeds(ctx context.Context, written []sink.Snapshot) error {
	t, err := chconn.NewExtTable("sped", "project_id", "Int64", "message_id", "Int64")
	if err != nil {
		return err
	}
	messages := map[msgKey]bool{}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range written {
		k := msgKey{s.ProjectID, s.MessageID}
		if messages[k] {
			continue
		}
		messages[k] = true
		if err := t.Append(k.project, k.message); err != nil {
			return err
		}
		lo, hi = min(lo, k.project), max(hi, k.project)
	}
	// The range narrows the read on 18.16, which narrows nothing by an
	// IN of an external table.
	q := schema.SpeedRefill(h.names, fmt.Sprintf("project_id BETWEEN %d AND %d AND %s", lo, hi, h.names.InExt("project_id, message_id", "sped")))
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), t), q); err != nil {
		return h.conn.Redact(fmt.Errorf("refresh the %s rows of %d messages: %w", schema.SpeedRollup, len(messages), err))
	}
	return nil
}

// readCreated adds to created the create_at of the messages of snapshots
// it lacks, from the messages table.
func (h *History) readCreated(ctx context.Context, snapshots []sink.Snapshot, created map[msgKey]sink.Time) error {
	missing := map[msgKey]bool{}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range snapshots {
		k := msgKey{s.ProjectID, s.MessageID}
		if _, ok := created[k]; !ok {
			missing[k] = true
			lo, hi = min(lo, k.project), max(hi, k.project)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	t, err := chconn.NewExtTable("unlisted", "project_id", "Int64", "id", "Int64")
	if err != nil {
		return err
	}
	for k := range missing {
		if err := t.Append(k.project, k.message); err != nil {
			return err
		}
	}
	// The range narrows the read on 18.16, which narrows nothing by an
	// IN of an external table.
	q := fmt.Sprintf("SELECT project_id, id, toUInt32(argMax(create_at, version)) FROM %s WHERE project_id BETWEEN %d AND %d AND %s GROUP BY project_id, id",
		h.names.Table(schema.MessagesTable.Name()), lo, hi, h.names.InExt("project_id, id", "unlisted"))
	err = chconn.QueryEach(chconn.WithExternal(ctx, t), h.conn, q, func(rows driver.Rows) error {
		var (
			k  msgKey
			at uint32
		)
		if err := rows.Scan(&k.project, &k.message, &at); err != nil {
			return err
		}
		created[k] = sink.Time(at)
		return nil
	})
	if err != nil {
		return h.conn.Redact(fmt.Errorf("read the create_at of %d messages from %s: %w", len(missing), schema.MessagesTable.Name(), err))
	}
	return nil
}

// refillAges computes again the age rollup's rows of the project
// snapshots of set from the stored history: what the reconcile does for
// a change no writer refreshed (rows inserted by other means, a write
// whose refresh failed).
func (h *History) refillAges(ctx context.Context, set chconn.SnapshotSet) error {
	if set.Len() == 0 {
		return nil
	}
	ext, in, err := h.names.SnapshotsIn("aged", set)
	if err != nil {
		return err
	}
	lo, hi := set.Projects()[0], set.Projects()[len(set.Projects())-1]
	projects := fmt.Sprintf("project_id BETWEEN %d AND %d", lo, hi)
	// SnapshotsIn sends the projects as aged_projects too.
	q := schema.AgeRefill(h.names, projects+" AND "+in, projects+" AND "+h.names.InExt("project_id", "aged_projects"))
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), ext...), q); err != nil {
		return h.conn.Redact(fmt.Errorf("refill %s for %d project snapshots: %w", schema.AgeRollup, set.Len(), err))
	}
	// The speeds of the messages of those snapshots, from their whole
	// curves: what also mends a speed row a write computed from a
	// replica behind it, or left when it failed. In cluster mode the
	// subquery reads a Distributed table inside a read of another:
	// GLOBAL, as InExt.
	op := "IN"
	if h.names.Clustered() {
		op = "GLOBAL IN"
	}
	messages := fmt.Sprintf("SELECT project_id, message_id FROM %s WHERE %s AND %s", h.names.Table(schema.SnapshotsTable.Name()), projects, in)
	q = schema.SpeedRefill(h.names, fmt.Sprintf("%s AND (project_id, message_id) %s (%s)", projects, op, messages))
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), ext...), q); err != nil {
		return h.conn.Redact(fmt.Errorf("refill %s for %d project snapshots: %w", schema.SpeedRollup, set.Len(), err))
	}
	return nil
}
