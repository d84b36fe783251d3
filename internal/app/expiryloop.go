package app

import (
	"context"
	"time"

	"github.com/readsync/readsync/internal/loop"

	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/expiry"
)

// The daemon's expiry: how often it runs, how long a daemon that ran it
// holds it (the others leave it to that one meanwhile), and the budget of
// one run, which shutdown waits for: a partition dropped on a cluster
// waits for every host.
const (
	expiryInterval = time.Hour
	expiryLease    = 3 * expiryInterval
	expiryTimeout  = 10 * time.Minute
)

// expiryLoop keeps the history within its retentions (READSYNC_RETAIN_*),
// in a loop of its own that no pass waits for: once the schema is
// migrated and then every expiryInterval, it reads the history's size into
// the metrics and, when a retention is set and no other daemon holds the
// expiry, drops the partitions older than it. Every daemon reads the size,
// so the alert ReadsyncExpiryBehind holds whichever pod runs the drops.
func (a *app) expiryLoop(ctx context.Context, ch *clickhouse.ClickHouse) {
	policy := a.retention()
	a.metrics.ArmExpiry(policy)
	owner := a.reconcileOwner()
	// A run under way at shutdown is let finish: a drop cut off leaves
	// the server with a statement its client dropped. A run's failures
	// are its own to report; the loop only paces the runs.
	r := loop.New(loop.Config{Ready: ch.Migrated, ReadyEvery: time.Second, Timeout: expiryTimeout, Grace: expiryTimeout})
	r.Run(ctx, func(rctx context.Context) (loop.Next, error) {
		if !policy.Empty() {
			a.expireOnce(rctx, ch, owner)
		}
		parts, err := ch.StoredPartitions(rctx)
		if ctx.Err() != nil {
			return loop.Next{}, nil
		}
		if err != nil {
			a.log.Warn("reading the history's partitions failed; its size's metrics are left out until it answers", "err", err)
		}
		a.metrics.ObserveStored(parts, err)
		return loop.Next{Wait: expiryInterval}, nil
	})
}

// expireOnce runs expiry once as owner, unless another daemon holds it.
func (a *app) expireOnce(ctx context.Context, ch *clickhouse.ClickHouse, owner string) {
	holder, err := ch.ClaimExpiry(ctx, owner, expiryLease)
	if err == nil && holder != "" {
		a.metrics.ObserveExpiry("held", expiry.Report{})
		return
	}
	var rep expiry.Report
	if err == nil {
		rep, err = ch.Expire(ctx, a.retention(), owner)
	}
	switch {
	case err != nil:
		a.log.Warn("expiry failed; the next run tries again", "err", err, "retry_in", expiryInterval.String())
		a.metrics.ObserveExpiry("error", rep)
	case rep.Waiting:
		a.log.Info("expiry waits for the move of message_read_snapshots onto its sort key")
		a.metrics.ObserveExpiry("waiting", rep)
	default:
		rows, bytes := rep.Rows()
		if len(rep.Dropped) > 0 {
			a.log.Info("expiry dropped partitions", "partitions", len(rep.Dropped), "rows", rows, "bytes", bytes)
		}
		for _, part := range rep.Held {
			a.log.Warn("expiry keeps a change log's partition past its retention: the reconcile has not read its changes yet",
				"table", part.Table, "partition", part.ID, "newest", part.Newest.Format(time.RFC3339),
				"first_unread", rep.Unread[part.Table].Format(time.RFC3339))
		}
		a.metrics.ObserveExpiry("ok", rep)
	}
}
