package app

import (
	"context"
	"time"

	"github.com/readsync/readsync/sink/clickhouse"
)

// nameHealthInterval is how often the daemon reads name_health into its
// metrics when no pass has ended: a minute, the finest a cron schedule
// ticks at, for a query that reads a day of failures.
const nameHealthInterval = time.Minute

// nameHealthTimeout bounds one read of name_health, which shutdown waits
// for.
const nameHealthTimeout = 30 * time.Second

// nameHealthLoop reads how many names of each schedule are failing, and
// for how many passes in a row, into the metrics the alert
// ReadsyncNamesNotRead reads: once the schema is migrated, after each
// cron pass of this process, and every nameHealthInterval for the other
// pods' passes. The counts come from the database, not from this
// process's passes: they hold every pod's names, and a restart keeps
// them.
func (a *app) nameHealthLoop(ctx context.Context, ch *clickhouse.ClickHouse) {
	for !ch.Migrated() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	t := time.NewTicker(nameHealthInterval)
	defer t.Stop()
	for {
		// A read in flight at shutdown is let finish: cut off, it would
		// drop its connection in the middle of a statement.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nameHealthTimeout)
		health, err := ch.NamesFailing(rctx, uint64(a.cfg.NamesNotReadPasses))
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			a.log.Warn("reading the failing names from name_health failed; the names' metrics are left out until it answers", "err", err)
			a.metrics.ForgetNameHealth()
		default:
			a.metrics.ObserveNameHealth(health)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.passed:
		}
	}
}
