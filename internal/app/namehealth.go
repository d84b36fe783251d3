package app

import (
	"context"
	"time"

	"github.com/readsync/readsync/internal/loop"

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
// them. It returns the loop and its step: the daemon runs one with the
// other, and wakes the loop when one of its cron passes ends.
func (a *app) nameHealthLoop(ch *clickhouse.ClickHouse) (*loop.Runner, loop.Step) {
	// A read in flight at shutdown is let finish: cut off, it would drop
	// its connection in the middle of a statement.
	r := loop.New(loop.Config{Ready: ch.Migrated, ReadyEvery: time.Second, Timeout: nameHealthTimeout, Grace: nameHealthTimeout})
	return r, func(ctx context.Context) (loop.Next, error) {
		health, err := ch.NamesFailing(ctx, uint64(a.cfg.NamesNotReadPasses))
		if err != nil {
			a.log.Warn("reading the failing names from name_health failed; the names' metrics are left out until it answers", "err", err)
			a.metrics.ForgetNameHealth()
		} else {
			a.metrics.ObserveNameHealth(health)
		}
		return loop.Next{Wait: nameHealthInterval}, nil
	}
}
