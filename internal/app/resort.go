package app

import (
	"context"
	"time"

	"github.com/readsync/readsync/internal/backoffpolicy"
	"github.com/readsync/readsync/sink/clickhouse"
)

// resortLoop moves message_read_snapshots onto this release's sort key
// in the background (see resort.Step), a bounded step at a time,
// until nothing is left to move: no pass waits for it, and a daemon
// stopped in the middle resumes at its next start after the last step
// recorded. Of several daemons, the one that holds the migration lock runs
// a step; the others wait their turn.
func (a *app) resortLoop(ctx context.Context, ch *clickhouse.ClickHouse) {
	retry := backoffpolicy.New(5 * time.Second)
	retry.MaxInterval = 10 * time.Minute
	for {
		wait := 10 * time.Second // until the schema is migrated
		if ch.Migrated() {
			rep, err := ch.ResortStep(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				wait = retry.NextBackOff()
				a.log.Warn("moving message_read_snapshots to its sort key failed; passes are not affected", "err", err, "retry_in", wait.Round(time.Second).String())
			case rep.Done:
				return
			default:
				retry.Reset()
				wait = rep.Wait
				switch rep.Phase {
				case "setup":
					a.log.Info("moving message_read_snapshots to its sort key in the background: new rows are copied from now on, the others after a settle delay",
						"settle", wait.String())
				case "copied":
					a.log.Info("moved a partition of message_read_snapshots to its sort key", "partition", rep.Partition, "partitions_left", rep.Left)
				case "copy":
					a.log.Debug("moved rows of message_read_snapshots to its sort key", "partition", rep.Partition, "rows", rep.Rows)
				}
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
