package clickhouse

import (
	"context"
	"time"

	"github.com/readsync/readsync/sink/expiry"
)

// Expire drops the partitions whose rows are all older than their
// resolution's retention under p, as owner (a daemon process's name, empty
// for a one-off command); see expiry.Expirer.Run. The schema is brought
// current first.
func (c *ClickHouse) Expire(ctx context.Context, p expiry.Policy, owner string) (expiry.Report, error) {
	if err := c.ensureSchema(ctx); err != nil {
		return expiry.Report{}, err
	}
	return expiry.New(c.conn, c.history).Run(ctx, p, owner)
}

// PlanExpiry lists what Expire would drop under p now, and changes
// nothing.
func (c *ClickHouse) PlanExpiry(ctx context.Context, p expiry.Policy) (expiry.Plan, error) {
	return expiry.New(c.conn, c.history).Plan(ctx, p)
}

// StoredPartitions lists the partitions of every table that expires (see
// expiry.Expirer.Partitions): the oldest row kept per resolution, and the
// rows and bytes of each table.
func (c *ClickHouse) StoredPartitions(ctx context.Context) ([]expiry.Partition, error) {
	return expiry.New(c.conn, c.history).Partitions(ctx)
}

// ExpiryEdges reads where each resolution's kept rows start (see
// expiry.ReadEdges).
func (c *ClickHouse) ExpiryEdges(ctx context.Context) (expiry.Edges, error) {
	return expiry.ReadEdges(ctx, c.conn)
}

// ClaimExpiry reports which daemon runs expiry now, empty when it is
// owner (see expiry.Expirer.Claim).
func (c *ClickHouse) ClaimExpiry(ctx context.Context, owner string, lease time.Duration) (string, error) {
	return expiry.New(c.conn, c.history).Claim(ctx, owner, lease)
}
