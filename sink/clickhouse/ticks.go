package clickhouse

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// RecordRuns inserts run records with one INSERT: the ticks a daemon
// records at start as missed, however many.
func (c *ClickHouse) RecordRuns(ctx context.Context, runs []sink.Run) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	return chconn.Insert(ctx, c.conn, schema.RunsTable, nil, runs)
}

// LastTicks returns, per schedule, the latest tick a daemon recorded
// (trigger cron) for the shard of the given index, or, with index -1, for
// an unsharded daemon. A schedule without one is absent.
func (c *ClickHouse) LastTicks(ctx context.Context, index int) (map[string]time.Time, error) {
	if err := c.ensureSchema(ctx); err != nil {
		return nil, err
	}
	shard := "shard = ''"
	if index >= 0 {
		shard = "splitByChar('/', shard)[1] = " + chconn.QuoteString(strconv.Itoa(index))
	}
	q := fmt.Sprintf("SELECT schedule, toUInt32(max(snapshot_at)) FROM %s WHERE trigger = 'cron' AND %s GROUP BY schedule", c.conn.Names().Table(schema.RunsTable.Name()), shard)
	ats, err := chconn.QueryMap[string, uint32](ctx, c.conn, q)
	if err != nil {
		return nil, c.conn.Redact(fmt.Errorf("last recorded ticks: %w", err))
	}
	last := make(map[string]time.Time, len(ats))
	for schedule, at := range ats {
		last[schedule] = sink.Time(at).Time()
	}
	return last, nil
}
