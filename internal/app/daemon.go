package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	gosync "sync"
	"time"

	"github.com/readsync/readsync/internal/health"
	"github.com/readsync/readsync/internal/kubeapi"
	"github.com/readsync/readsync/internal/metrics"
	"github.com/readsync/readsync/internal/schedule"
	"github.com/readsync/readsync/internal/shard"
	"github.com/readsync/readsync/internal/status"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sync"
)

// daemon runs every schedule on its cron until ctx is cancelled, then lets
// a running pass finish within the shutdown grace. ClickHouse being down
// does not stop it: passes spool their rows, and a background flusher
// delivers them once the server answers.
func (a *app) daemon(ctx context.Context) int {
	sh, err := a.startingShare(ctx)
	if err != nil {
		return a.configFailed(err)
	}
	ln, err := net.Listen("tcp", a.cfg.HTTPAddr)
	if err != nil {
		return a.configFailed(fmt.Errorf("READSYNC_HTTP_ADDR: %w", err))
	}
	// Each armed schedule has its series before the first scrape can
	// happen, so an alert on a schedule that never succeeds has a value
	// to fire on.
	schedules := a.armedSchedules()
	for _, s := range schedules {
		a.metrics.ArmSchedule(s.Name)
	}
	// The listener answers from the start to the end: liveness at once and
	// throughout shutdown, readiness once ClickHouse is migrated and
	// answering, and no longer once shutdown begins.
	probes := &health.Probes{}
	page := status.NewPage()
	hs := health.Serve(ln, probes, a.metrics.Registry(), a.log, page)

	st, err := a.openStores(ctx)
	if err != nil {
		hs.Stop()
		return a.configFailed(err)
	}
	// Stop in the reverse order of start: the HTTP server reports on
	// ClickHouse, so it has stopped before ClickHouse closes.
	defer func() {
		hs.Stop()
		a.log.Debug("health and metrics listener stopped")
		st.Close()
		a.log.Debug("ClickHouse connection and spool closed")
	}()
	a.quarantineWaits(st.spool)
	probes.SetReady(a.readiness(st))
	board := a.statusBoard(schedules, st.ch, st.spool)
	page.Show(board)
	a.runSchedules(ctx, st, schedules, sh, probes, board)
	return ExitOK
}

// startingShare reads the share at start. A pod the API server refuses,
// or whose StatefulSet it does not know, is misconfigured: that is the
// error, said now rather than at every tick. An API server that does not
// answer is waited out (see shard.StatefulSet): every name until then.
func (a *app) startingShare(ctx context.Context) (shard.Share, error) {
	sh, err := a.shares.Check(ctx)
	switch {
	case err != nil && kubeapi.Permanent(err):
		return shard.Share{}, err
	case err != nil:
		a.log.Warn("cannot read the shard count at start; each pass tries again", "err", err)
		return shard.All(), nil
	}
	a.metrics.ObserveShare(sh)
	return sh, nil
}

// runSchedules runs the schedules' passes and the background loops until
// ctx is cancelled, then stops them: the scheduling at once, with readiness,
// and a running pass once it finishes or the shutdown grace ends.
func (a *app) runSchedules(ctx context.Context, st stores, schedules []sync.Schedule, sh shard.Share, probes *health.Probes, board *status.Board) {
	syncer := a.syncer(st.ch, st.spool)
	resolver := sync.NewResolver(st.ch)
	// Passes run on a context of their own: SIGTERM stops the scheduling at
	// once but only cancels a running pass when the grace period is over.
	passCtx, cancelPasses := withGrace(ctx, a.cfg.ShutdownGrace)
	defer cancelPasses()

	// The background loops: the spool's replay; the reconcile, which
	// from the start catches up with whatever changed while readsync was
	// down (a process killed between a write and its refresh, rows written
	// by another) and then with each pass's writes; the move of a
	// database of an earlier release onto this one's sort key; the
	// reading of the failing names into the metrics; the expiry of
	// what is older than its retention; and the status page's reads of
	// ClickHouse. None holds a pass.
	var background gosync.WaitGroup
	background.Go(func() { a.flushLoop(ctx, st) })
	reconciler := a.reconcileLoop(st.ch, board)
	background.Go(func() { reconciler.Run(ctx) })
	background.Go(func() { a.resortLoop(ctx, st.ch) })
	health, readHealth := a.nameHealthLoop(st.ch)
	background.Go(func() { health.Run(ctx, readHealth) })
	background.Go(func() { a.expiryLoop(ctx, st.ch) })
	background.Go(func() { board.Loop().Run(ctx, board.Refresh) })

	// Every tick is accounted for in sync_runs: those nobody ran while
	// readsync was down are recorded before the first new one.
	a.recordMissedTicks(ctx, st, schedules, sh)

	c := schedule.Start(schedules, a.log,
		func(s sync.Schedule, tick time.Time) {
			a.cronPass(passCtx, syncer, resolver, s, tick)
			// The pass's writes are the reconcile's to check, in its own
			// loop: the next tick never waits for it; and the names'
			// health may have changed.
			reconciler.Wake()
			health.Wake()
		},
		func(s sync.Schedule, tick time.Time) { a.skippedTick(passCtx, syncer, s, tick) })
	a.log.Info("daemon started", "schedules", len(schedules), "shard", a.shardSetting(sh), "version", a.build.Version)

	<-ctx.Done()
	probes.Stopping()
	a.log.Info("shutting down: no new passes; a running pass may finish", "grace", a.cfg.ShutdownGrace.String())
	// Stop returns when running passes return; passes cancelled at the
	// end of the grace spool their rows and return promptly.
	c.Stop()
	background.Wait()
	a.log.Info("daemon stopped", "spool_entries", st.spool.Stats().Entries)
}

// armedSchedules returns the schedules the daemon arms. With a fixed
// READSYNC_SHARD, a schedule with no names in the shard is left out, as it
// never has any; with a StatefulSet's count, which may change at any pass,
// every schedule is armed and each pass takes its share then.
func (a *app) armedSchedules() []sync.Schedule {
	fixed, ok := a.shares.(shard.Share)
	if !ok {
		return a.cfg.Schedules
	}
	var out []sync.Schedule
	for _, s := range a.cfg.Schedules {
		// A file's or a query's names may change at any pass.
		if !s.Dynamic() && len(fixed.Filter(s.NFTNames)) == 0 {
			a.log.Info("schedule has no names in this shard; not armed", "schedule", s.Name, "shard", fixed.String())
			continue
		}
		out = append(out, s)
	}
	return out
}

// shardSetting describes READSYNC_SHARD for the start's log line: the
// share, and for a StatefulSet's pod where the count comes from.
func (a *app) shardSetting(sh shard.Share) string {
	if a.cfg.Member == nil {
		return sh.String()
	}
	return fmt.Sprintf("%s (ordinal %d of StatefulSet %s's replicas, read before each pass)", sh, a.cfg.Member.Ordinal, a.cfg.Member.Set)
}

// flushLoop delivers spooled entries at start and then every
// READSYNC_SPOOL_FLUSH_INTERVAL until ctx ends, so rows spooled during an
// outage arrive soon after it ends. It is the only place the daemon
// replays the spool: a pass never waits for a backlog, whose replay could
// take the time the pass has until its next tick.
//
// Until ClickHouse has been migrated, each tick tries that first and
// replays only once it succeeds: a replayed write would try the same
// migration and fail the same way. At start, openStores has just tried.
func (a *app) flushLoop(ctx context.Context, st stores) {
	t := time.NewTicker(a.cfg.SpoolFlushInterval)
	defer t.Stop()
	for {
		if st.ch.Migrated() {
			a.flushSpool(ctx, st)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !st.ch.Migrated() && a.applyMigrations(ctx, st.ch) {
			a.log.Info("ClickHouse takes writes again; tables ready")
		}
	}
}

// readiness reports what keeps the daemon from writing: migrations not
// applied (ClickHouse has not answered since start, or refused them), the
// last write refused, or ClickHouse not answering now. Passes go on
// whatever it says, into the spool.
func (a *app) readiness(st stores) func(context.Context) error {
	return func(ctx context.Context) error {
		if !st.ch.Migrated() {
			if behind := (*clickhouse.SchemaBehindError)(nil); errors.As(st.ch.MigrateErr(), &behind) {
				return fmt.Errorf("%w; rows go to the spool", behind)
			}
			if err := st.ch.MigrateErr(); err != nil {
				if _, refused := sink.Refused(err); refused {
					return fmt.Errorf("migrations not applied, rows go to the spool: %s", sink.Describe(err))
				}
			}
			return errors.New("ClickHouse has not answered since start: migrations not run, rows go to the spool")
		}
		if d := a.metrics.Delivery(); d.State == metrics.DeliveryRefused {
			return fmt.Errorf("the last write was refused, rows go to the spool: %s", sink.Describe(d.Err))
		}
		if _, err := st.ch.Ping(ctx); err != nil {
			return fmt.Errorf("ClickHouse does not answer, rows go to the spool: %w", err)
		}
		return nil
	}
}

// cronPass runs one scheduled pass stamped with its tick, over the
// schedule's names in the share this process takes now. It must end
// before the schedule's next tick, so a slow upstream costs one snapshot
// rather than piling passes up. It leaves the spool to flushLoop: new
// snapshots come first.
func (a *app) cronPass(ctx context.Context, syncer *sync.Syncer, resolver *sync.Resolver, s sync.Schedule, tick time.Time) {
	if tick.IsZero() {
		tick = time.Now()
	}
	tick = tick.UTC().Truncate(time.Second)
	next := s.Spec.Next(tick)
	// The cause is what the names the deadline cuts off report, in the log
	// and in sync_runs, rather than the timeout of their last request.
	ctx, cancel := context.WithDeadlineCause(ctx, next,
		fmt.Errorf("cut off by the next tick at %s", next.UTC().Format(time.RFC3339)))
	defer cancel()
	// The names and the share are read at every pass, so that a name
	// added to the file or the table, and a change of the StatefulSet's
	// replicas, apply from the next tick on.
	all, ok := a.passNames(ctx, syncer, resolver, s, tick)
	if !ok {
		return
	}
	sh := a.shares.Current(ctx)
	a.metrics.ObserveShare(sh)
	names := sh.Filter(all)
	if len(names) == 0 && len(all) > 0 {
		level := slog.LevelDebug
		if sh.Index >= sh.Count {
			level = slog.LevelInfo // a pod the StatefulSet is removing: worth a line
		}
		a.log.Log(ctx, level, "no names of this schedule in this process's share at this tick",
			"schedule", s.Name, "shard", sh.String(), "snapshot_at", tick)
		a.metrics.ObserveNothingOwed(s.Name)
		return
	}
	_, err := a.runPass(ctx, syncer, sync.Pass{
		Names:      names,
		Schedule:   s.Name,
		Trigger:    sync.TriggerCron,
		SnapshotAt: tick,
		Shard:      sh.Label(),
	})
	if err != nil {
		a.log.Error("pass could not be recorded", "schedule", s.Name, "err", err)
	}
}

// reconcileLoop is the daemon's reconcile (see derived.Loop): steps of at
// most derived.DefaultStepChanges changes, each with a budget of its own,
// run once ClickHouse is migrated, as this process, whose steps other
// daemons then leave to it.
func (a *app) reconcileLoop(ch *clickhouse.ClickHouse, board *status.Board) *derived.Loop {
	return derived.NewLoop(derived.LoopConfig{
		Steps:       ch,
		Ready:       ch.Migrated,
		Owner:       a.reconcileOwner(),
		Limit:       derived.DefaultStepChanges,
		Lease:       ch.ReconcileLease(),
		Settle:      ch.ReconcileSettle(),
		Idle:        reconcileIdle,
		StepTimeout: reconcileStepTimeout,
		Grace:       a.cfg.ShutdownGrace,
		Log:         a.log,
		Observe: func(rep derived.StepReport, d time.Duration, err error) {
			a.metrics.ObserveReconcileStep(rep, d, err)
			board.ObserveReconcile(rep, d, err)
		},
	})
}

// The reconcile loop's timing: how long it waits, with no pass to wake it,
// before it looks for changes written by others; and each step's budget,
// within the lease another daemon gives the steps it records.
const (
	reconcileIdle        = time.Minute
	reconcileStepTimeout = derived.Lease
)

// reconcileOwner names this daemon in the reconcile steps and expiry
// runs it records, for the other daemons to leave them to it: its
// StatefulSet pod's name, which a restarted pod keeps, so that it resumes
// at once rather than wait out the lease of its earlier self; or the pod
// name READSYNC_SHARD gives (readsync-2/3); or its host's name. Two
// daemons of one name both run steps, which costs work and nothing else.
func (a *app) reconcileOwner() string {
	if a.cfg.Member != nil {
		return a.cfg.Member.Pod
	}
	if pod, _, ok := strings.Cut(a.cfg.Shard, "/"); ok && strings.ContainsFunc(pod, func(r rune) bool { return r < '0' || r > '9' }) {
		return strings.TrimSpace(pod)
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		return host
	}
	return "readsync"
}
