package derived

import (
	"context"
	"fmt"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// FillAges adds the snapshot rows of a write to the age rollup (package
// schema's age.go), each with the create_at of its message among the
// write's messages. A pass lists each message with its statistics, so a
// write holds the message of every snapshot it holds; a snapshot whose
// message it lacks, or whose create_at is unusable (the Unix epoch), has
// no age. The rows go to the server as external data: the INSERT reads
// no table. The rollup keeps a maximum, so a write sent again adds
// nothing new.
func (h *History) FillAges(ctx context.Context, messages []sink.Message, snapshots []sink.Snapshot) error {
	if len(snapshots) == 0 {
		return nil
	}
	created := make(map[msgKey]sink.Time, len(messages))
	for _, m := range messages {
		// The message rows of a write are of one pass: one create_at each.
		created[msgKey{m.ProjectID, m.ID}] = m.CreateAt
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
