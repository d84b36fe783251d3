package sink

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// RecordRuns inserts run records with one INSERT: the ticks a daemon
// records at start as missed, however many.
func (c *ClickHouse) RecordRuns(ctx context.Context, runs []Run) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	return insert(ctx, c, &runsTable, runs)
}

// LastTick returns the latest tick of the schedule that a daemon recorded
// (trigger cron) for the shard of the given index, or, with index -1, for
// an unsharded daemon; the zero time when there is none.
func (c *ClickHouse) LastTick(ctx context.Context, schedule string, index int) (time.Time, error) {
	if err := c.ensureSchema(ctx); err != nil {
		return time.Time{}, err
	}
	shard := "shard = ''"
	if index >= 0 {
		shard = "splitByChar('/', shard)[1] = " + quoteString(strconv.Itoa(index))
	}
	q := fmt.Sprintf("SELECT toUInt32(max(snapshot_at)) FROM %s WHERE trigger = 'cron' AND schedule = ? AND %s", c.ddl.table(runsTable.name), shard)
	var last uint32
	if err := c.conn.QueryRow(ctx, q, schedule).Scan(&last); err != nil {
		return time.Time{}, c.redact(fmt.Errorf("last recorded tick of schedule %q: %w", schedule, err))
	}
	if last == 0 {
		return time.Time{}, nil
	}
	return time.Unix(int64(last), 0).UTC(), nil
}
