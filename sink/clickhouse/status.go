package clickhouse

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// The reads of the daemon's status page. Each names a range of its
// table's sort key (sync_runs and expiries are ordered by their start)
// or, for name_health, the failing half of the view the server prunes
// the successes from: none grows with the history kept.

// LastPasses returns, by schedule, the last cron pass recorded by the
// process of the given share ("i/n", empty for one that takes every
// name) that started at or after since. A schedule with none is absent.
// A tick that ran no pass (skipped while the previous pass ran, or missed
// while readsync was down) is not a pass: the page shows the last that
// ran, and schedule_coverage counts the others.
func (c *ClickHouse) LastPasses(ctx context.Context, shard string, since time.Time) (map[string]sink.Run, error) {
	q := fmt.Sprintf(`SELECT run_id, schedule, trigger, snapshot_at, started_at, finished_at, nft_total, nft_ok, nft_failed, messages, status, error, shard
FROM %s WHERE started_at >= toDateTime(%d) AND trigger = 'cron' AND shard = %s AND status NOT IN ('skipped', 'missed')
ORDER BY started_at DESC, run_id LIMIT 1 BY schedule`,
		c.conn.Names().Table(schema.RunsTable.Name()), since.Unix(), chconn.QuoteString(shard))
	out := map[string]sink.Run{}
	err := chconn.QueryEach(ctx, c.conn, q, func(rows driver.Rows) error {
		var r sink.Run
		if err := rows.Scan(&r.RunID, &r.Schedule, &r.Trigger, &r.SnapshotAt, &r.StartedAt, &r.FinishedAt,
			&r.NFTTotal, &r.NFTOK, &r.NFTFailed, &r.Messages, &r.Status, &r.Error, &r.Shard); err != nil {
			return err
		}
		r.SnapshotAt, r.StartedAt, r.FinishedAt = r.SnapshotAt.UTC(), r.StartedAt.UTC(), r.FinishedAt.UTC()
		out[r.Schedule] = r
		return nil
	})
	if err != nil {
		return nil, c.conn.Redact(fmt.Errorf("read the last passes from %s: %w", schema.RunsTable.Name(), err))
	}
	return out, nil
}

// TopFailingNames returns at most limit rows of name_health whose names
// are failing, those failing the most passes in a row first, as
// FailingNames orders them.
func (c *ClickHouse) TopFailingNames(ctx context.Context, limit int) ([]NameHealth, error) {
	var out []NameHealth
	err := chconn.QueryEach(ctx, c.conn, failingNamesQuery(c.conn.Names(), nil, limit), func(rows driver.Rows) error {
		h, err := scanNameHealth(rows)
		if err != nil {
			return err
		}
		out = append(out, h)
		return nil
	})
	if err != nil {
		return nil, c.conn.Redact(fmt.Errorf("read %s: %w", schema.NameHealthView, err))
	}
	return out, nil
}

// ExpiryRuns is what the record of expiry says of its recent runs.
type ExpiryRuns struct {
	// LastRun is when a daemon's expiry last ran, and Owner which one;
	// zero when none ran in the time asked about.
	LastRun time.Time
	Owner   string
	// LastDrop is when a partition was last dropped, zero for none in
	// that time; Dropped counts the partitions dropped in it.
	LastDrop time.Time
	Dropped  uint64
}

// LastExpiry reads the expiries recorded at or after since.
func (c *ClickHouse) LastExpiry(ctx context.Context, since time.Time) (ExpiryRuns, error) {
	q := fmt.Sprintf(`SELECT toUInt32(max(started_at)), argMax(owner, started_at), toUInt32(maxIf(started_at, table != '')), countIf(table != '')
FROM %s WHERE started_at >= toDateTime(%d)`, c.conn.Names().Table(schema.Expiries), since.Unix())
	var (
		r             ExpiryRuns
		last, dropped uint32
	)
	if err := c.conn.QueryRow(ctx, q).Scan(&last, &r.Owner, &dropped, &r.Dropped); err != nil {
		return ExpiryRuns{}, c.conn.Redact(fmt.Errorf("read the last expiry from %s: %w", schema.Expiries, err))
	}
	if last > 0 {
		r.LastRun = sink.Time(last).Time()
	}
	if dropped > 0 {
		r.LastDrop = sink.Time(dropped).Time()
	}
	return r, nil
}
