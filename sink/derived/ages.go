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
//
// It returns the rows it added, with their messages' create_at, from
// which the write's refresh carries the messages' speeds forward
// (speeds.go).
func (h *History) FillAges(ctx context.Context, messages []sink.Message, snapshots []sink.Snapshot) (*Aged, error) {
	if len(snapshots) == 0 {
		return nil, nil
	}
	created := make(map[msgKey]sink.Time, len(messages))
	for _, m := range messages {
		// The message rows of a write are of one pass: one create_at each.
		created[msgKey{m.ProjectID, m.ID}] = m.CreateAt
	}
	if err := h.readCreated(ctx, snapshots, created); err != nil {
		return nil, err
	}
	t, err := chconn.NewExtTable("aged", schema.AgeExtColumns...)
	if err != nil {
		return nil, err
	}
	aged := &Aged{}
	for _, s := range snapshots {
		c := created[msgKey{s.ProjectID, s.MessageID}]
		if c == 0 {
			continue
		}
		if err := t.Append(s.ProjectID, s.MessageID, c.Time(), s.SnapshotAt.Time(), s.Version, s.ReadCount, s.Total, s.Percent); err != nil {
			return nil, err
		}
		aged.rows = append(aged.rows, agedRow{project: s.ProjectID, message: s.MessageID, created: uint32(c), at: uint32(s.SnapshotAt),
			version: s.Version, reads: s.ReadCount})
	}
	if len(aged.rows) == 0 {
		return nil, nil
	}
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), t), schema.AgeFill(h.names, "aged")); err != nil {
		return nil, h.conn.Redact(fmt.Errorf("add %d snapshot rows to %s: %w", len(aged.rows), schema.AgeRollup, err))
	}
	sortAged(aged.rows)
	return aged, nil
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
