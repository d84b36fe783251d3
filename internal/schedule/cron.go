// Package schedule is the daemon's scheduling of passes: each schedule
// armed on its cron, one pass of a schedule at a time, and the records of
// the ticks that ran no pass (skipped while the previous pass ran, or
// missed while no daemon ran).
package schedule

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/readsync/readsync/sync"
)

// Cron runs passes on the schedules' crons, in UTC, from Start until Stop.
type Cron struct {
	c *cron.Cron
}

// Start arms every schedule on its cron and logs when each next runs.
// At each tick, pass runs for the schedule, stamped with the tick it was
// started for; a tick that finds the schedule's previous pass still
// running calls skipped instead, so that one pass of a schedule runs at a
// time. Both run on the scheduler's goroutines, until Stop.
func Start(schedules []sync.Schedule, log *slog.Logger, pass, skipped func(s sync.Schedule, tick time.Time)) *Cron {
	cl := cronLogger{log}
	c := cron.New(
		cron.WithLocation(time.UTC),
		cron.WithParser(sync.CronParser()),
		cron.WithLogger(cl),
		cron.WithChain(cron.Recover(cl)),
	)
	names := make(map[cron.EntryID]string, len(schedules))
	for _, s := range schedules {
		var id cron.EntryID
		// One pass of a schedule at a time: a tick that finds the
		// previous pass still running is skipped, and recorded as such.
		var running atomic.Bool
		// The job reads its own entry to learn the tick it was started for;
		// the scheduler has recorded it by the time the job can ask.
		id = c.Schedule(s.Spec, cron.FuncJob(func() {
			tick := c.Entry(id).Prev
			if !running.CompareAndSwap(false, true) {
				skipped(s, tick)
				return
			}
			defer running.Store(false)
			pass(s, tick)
		}))
		names[id] = s.Name
	}
	c.Start()
	for _, e := range c.Entries() {
		log.Info("schedule armed", "schedule", names[e.ID], "next", e.Next)
	}
	return &Cron{c: c}
}

// Stop arms no more passes and returns when the running ones have
// returned.
func (c *Cron) Stop() {
	<-c.c.Stop().Done()
}

// cronLogger routes the scheduler's messages into the process logger.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, kv ...any) {
	// The scheduler reports every wake-up at info; that is debug detail here.
	l.log.Debug("cron: "+msg, kv...)
}

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}
