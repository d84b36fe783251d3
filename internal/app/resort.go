package app

import (
	"context"
	"time"

	"github.com/readsync/readsync/internal/loop"
	"github.com/readsync/readsync/sink/clickhouse"
)

// resortLoop moves message_read_snapshots onto this release's sort key
// in the background (see resort.Step), a bounded step at a time,
// until nothing is left to move: no pass waits for it, and a daemon
// stopped in the middle resumes at its next start after the last step
// recorded. Of several daemons, the one that holds the migration lock runs
// a step; the others wait their turn.
func (a *app) resortLoop(ctx context.Context, ch *clickhouse.ClickHouse) {
	r := loop.New(loop.Config{
		Ready: ch.Migrated, ReadyEvery: 10 * time.Second,
		Retry: 5 * time.Second, MaxRetry: 10 * time.Minute,
		Failed: func(err error, wait time.Duration) {
			a.log.Warn("moving message_read_snapshots to its sort key failed; passes are not affected", "err", err, "retry_in", wait.Round(time.Second).String())
		},
	})
	r.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		rep, err := ch.ResortStep(ctx)
		if err != nil || rep.Done {
			return loop.Next{Done: rep.Done}, err
		}
		switch rep.Phase {
		case "setup":
			a.log.Info("moving message_read_snapshots to its sort key in the background: new rows are copied from now on, the others after a settle delay",
				"settle", rep.Wait.String())
		case "copied":
			a.log.Info("moved a partition of message_read_snapshots to its sort key", "partition", rep.Partition, "partitions_left", rep.Left)
		case "copy":
			a.log.Debug("moved rows of message_read_snapshots to its sort key", "partition", rep.Partition, "rows", rep.Rows)
		}
		return loop.Next{Wait: rep.Wait}, nil
	})
}
