package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/readsync/readsync/sync"
)

// shutdownGrace is how long a running pass may go on after SIGTERM before
// it is cancelled.
const shutdownGrace = 30 * time.Second

// daemon migrates ClickHouse, runs every schedule on its cron until ctx is
// cancelled, then lets a running pass finish within the grace period.
func (a *app) daemon(ctx context.Context) int {
	ch, err := a.openClickHouse(ctx)
	if err != nil {
		a.log.Error("ClickHouse unavailable", "err", err)
		return exitFailed
	}
	defer ch.Close()
	syncer := a.syncer(ch)

	// Passes run on a context of their own: SIGTERM stops the scheduling at
	// once but only cancels a running pass when the grace period is over.
	passCtx, cancelPasses := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelPasses()

	cl := cronLogger{a.log}
	c := cron.New(
		cron.WithLocation(time.UTC),
		cron.WithParser(sync.CronParser()),
		cron.WithLogger(cl),
		cron.WithChain(cron.Recover(cl), cron.SkipIfStillRunning(cl)),
	)
	names := make(map[cron.EntryID]string, len(a.cfg.Schedules))
	for _, s := range a.cfg.Schedules {
		var id cron.EntryID
		// The job reads its own entry to learn the tick it was started for;
		// the scheduler has recorded it by the time the job can ask.
		id = c.Schedule(s.Spec, cron.FuncJob(func() {
			a.cronPass(passCtx, syncer, s, c.Entry(id).Prev)
		}))
		names[id] = s.Name
	}
	c.Start()
	for _, e := range c.Entries() {
		a.log.Info("schedule armed", "schedule", names[e.ID], "next", e.Next)
	}
	a.log.Info("daemon started", "schedules", len(a.cfg.Schedules), "version", version)

	<-ctx.Done()
	a.log.Info("shutting down: no new passes; waiting for a running pass", "grace", shutdownGrace.String())
	stopped := c.Stop()
	select {
	case <-stopped.Done():
	case <-time.After(shutdownGrace):
		a.log.Warn("shutdown grace elapsed, cancelling the running pass")
		cancelPasses()
		<-stopped.Done()
	}
	a.log.Info("daemon stopped")
	return exitOK
}

// cronPass runs one scheduled pass stamped with its tick. It must end
// before the schedule's next tick, so a slow upstream costs one snapshot
// rather than piling passes up.
func (a *app) cronPass(ctx context.Context, syncer *sync.Syncer, s sync.Schedule, tick time.Time) {
	if tick.IsZero() {
		tick = time.Now()
	}
	tick = tick.UTC().Truncate(time.Second)
	ctx, cancel := context.WithDeadline(ctx, s.Spec.Next(tick))
	defer cancel()
	_, err := syncer.Run(ctx, sync.Pass{
		Names:      s.NFTNames,
		Schedule:   s.Name,
		Trigger:    sync.TriggerCron,
		SnapshotAt: tick,
	})
	if err != nil {
		a.log.Error("pass could not be recorded", "schedule", s.Name, "err", err)
	}
}

// cronLogger routes the scheduler's messages into the process logger.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, kv ...any) {
	if msg == "skip" {
		// SkipIfStillRunning's only message: a tick that was not run.
		l.log.Warn("pass skipped: the previous pass of this schedule is still running", kv...)
		return
	}
	// The scheduler reports every wake-up at info; that is debug detail here.
	l.log.Debug("cron: "+msg, kv...)
}

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}
