package clickhouse

import (
	"context"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// Write inserts the batch with one INSERT per non-empty table, then
// refreshes the derived rows of the project snapshots and days it wrote.
// Rows already written are harmless to write again: every table
// deduplicates on its key, keeping the highest version.
//
// Write fails only when the rows did not reach the server. A refresh that
// fails is logged and left to the next reconcile (see Reconcile), which
// finds the snapshots in the changes the server recorded: failing the
// write instead would send the same rows again.
func (c *ClickHouse) Write(ctx context.Context, b *sink.Batch) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	// What the refresh needs of the rows before these: a refresh that
	// cannot have it recomputes from the stored history.
	prepared, err := c.history.Prepare(ctx, b.Snapshots)
	if err != nil {
		c.conn.Log().Warn("the rows before a write not read; its refresh reads the stored history", "snapshot_rows", len(b.Snapshots), "err", err)
	}
	if err := chconn.Insert(ctx, c.conn, schema.ProjectsTable, b, b.Projects); err != nil {
		return err
	}
	if err := chconn.Insert(ctx, c.conn, schema.MessagesTable, b, b.Messages); err != nil {
		return err
	}
	if err := chconn.Insert(ctx, c.conn, schema.SnapshotsTable, b, b.Snapshots); err != nil {
		return err
	}
	// The age rollup takes the rows from the write itself (it needs each
	// message's create_at, which no snapshot row holds): a write that
	// fails here is sent again, which the rollup's maximum absorbs. The
	// messages' speeds, carried forward from what it added, are part of
	// the refresh below.
	aged, err := c.history.FillAges(ctx, b.Messages, b.Snapshots)
	if err != nil {
		return err
	}
	if err := chconn.Insert(ctx, c.conn, schema.NameFailuresTable, b, b.NameFailures); err != nil {
		return err
	}
	if err := chconn.Insert(ctx, c.conn, schema.NameSuccessesTable, b, b.NameSuccesses); err != nil {
		return err
	}
	if err := c.history.Refresh(ctx, b.Snapshots, b.Schedule, prepared, aged); err != nil {
		c.conn.Log().Warn("derived rows not refreshed after a write; the next reconcile refreshes them", "snapshot_rows", len(b.Snapshots), "err", err)
	}
	return nil
}

// RecordRun inserts one row into sync_runs.
func (c *ClickHouse) RecordRun(ctx context.Context, r sink.Run) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	return chconn.Insert(ctx, c.conn, schema.RunsTable, nil, []sink.Run{r})
}
