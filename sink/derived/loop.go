package derived

import (
	"context"
	"log/slog"
	"time"

	"github.com/readsync/readsync/internal/loop"
)

// Stepper runs one reconcile step as owner (see History.ReconcileStep);
// package clickhouse's ClickHouse is one.
type Stepper interface {
	ReconcileStep(ctx context.Context, owner string, limit int) (StepReport, error)
}

// LoopConfig is what a Loop works with.
type LoopConfig struct {
	// Steps runs the steps.
	Steps Stepper
	// Ready reports whether the database takes writes (its migrations are
	// applied); until it does, the loop waits.
	Ready func() bool
	// Owner names this process in the steps it records, so that other
	// daemons leave the work to it (see History.Lease).
	Owner string
	// Limit bounds the changes a step reads; DefaultStepChanges when 0.
	Limit int
	// Lease is how long another daemon's step holds the steps (see
	// History.Lease): while one does, the loop looks again within half of
	// it. Lease when 0.
	Lease time.Duration
	// Settle is how long a change waits before a step reads it (see
	// History.Settle): after a step that left only younger changes, the
	// loop looks again that much later.
	Settle time.Duration
	// Idle is the longest the loop waits for a Wake before it looks for
	// changes nobody signalled (rows written by hand or by another
	// process).
	Idle time.Duration
	// StepTimeout is each step's own budget.
	StepTimeout time.Duration
	// Grace is how long a step under way when Run's context ends may go
	// on: a stop between two steps loses none, and a server is not left
	// with a statement its client dropped.
	Grace time.Duration
	// Log receives the catch-up's start and end, and failed steps.
	Log *slog.Logger
	// Observe, when set, is told of every step, its duration and error.
	Observe func(rep StepReport, d time.Duration, err error)
}

// Loop is the reconcile of a daemon: a loop of its own beside the passes,
// which never waits for it (a loop.Runner). It runs steps back to back
// while changes wait older than the horizon, so that any backlog drains,
// then sleeps until a Wake (a pass wrote), until the changes it left are
// old enough to read, or for Idle. A failed step is tried again after a
// growing wait. Run it once; Wake may be called from any goroutine.
type Loop struct {
	cfg    LoopConfig
	runner *loop.Runner
	c      catchUp
}

// NewLoop returns a Loop; Run starts it.
func NewLoop(cfg LoopConfig) *Loop {
	if cfg.Limit <= 0 {
		cfg.Limit = DefaultStepChanges
	}
	if cfg.Lease <= 0 {
		cfg.Lease = Lease
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Observe == nil {
		cfg.Observe = func(StepReport, time.Duration, error) {}
	}
	l := &Loop{cfg: cfg}
	l.runner = loop.New(loop.Config{
		Ready: cfg.Ready, ReadyEvery: cfg.Idle,
		Timeout: cfg.StepTimeout, Grace: cfg.Grace,
		Retry: 5 * time.Second, MaxRetry: 5 * time.Minute,
		Failed: func(err error, wait time.Duration) {
			cfg.Log.Warn("reconcile step failed; the derived history waits for the next try", "err", err, "retry_in", wait.Round(time.Second).String())
		},
	})
	return l
}

// Wake makes the loop look for changes now, or as soon as its running
// step ends. It never blocks.
func (l *Loop) Wake() { l.runner.Wake() }

// Run runs the loop until ctx ends; a step under way then may finish
// within the Grace, and is cancelled after it. The next start resumes from
// the last step recorded.
func (l *Loop) Run(ctx context.Context) {
	l.runner.Run(ctx, func(sctx context.Context) (loop.Next, error) { return l.step(ctx, sctx) })
}

// catchUp follows a backlog from the first step that did not drain it to
// the step that did.
type catchUp struct {
	started time.Time
	steps   int
	changes int
}

// step runs one step on sctx, the step's own context (ctx is the loop's),
// and says when to run the next: at once while changes wait older than
// the horizon, within another daemon's lease when it holds the work, once
// the changes left are settled, or after Idle.
func (l *Loop) step(ctx, sctx context.Context) (loop.Next, error) {
	c := &l.c
	start := time.Now()
	rep, err := l.cfg.Steps.ReconcileStep(sctx, l.cfg.Owner, l.cfg.Limit)
	if ctx.Err() != nil && err != nil {
		return loop.Next{}, ctx.Err() // stopped, not failed: the step is lost, and resumed at the next start
	}
	l.cfg.Observe(rep, time.Since(start), err)
	if err != nil {
		return loop.Next{}, err
	}
	if rep.HeldBy != "" {
		// Another daemon runs the steps; look again within its lease.
		return loop.Next{Wait: min(l.cfg.Idle, l.cfg.Lease/2)}, nil
	}
	if rep.ChangedSnapshots+rep.ChangedTicks > 0 {
		l.cfg.Log.Info("reconcile step", "changed_snapshots", rep.ChangedSnapshots, "changed_ticks", rep.ChangedTicks,
			"refreshed", rep.Refreshed, "rewritten", rep.Rewritten, "left_to_writers", rep.LeftToWriters, "read_rows", rep.ReadRows, "read_bytes", rep.ReadBytes,
			"pending_changes", rep.Pending, "duration_ms", time.Since(start).Milliseconds())
	}
	if !c.started.IsZero() {
		c.steps++
		c.changes += rep.ChangedSnapshots + rep.ChangedTicks
	}
	if !rep.CaughtUp {
		if c.started.IsZero() {
			*c = catchUp{started: start, steps: 1, changes: rep.ChangedSnapshots + rep.ChangedTicks}
			l.cfg.Log.Info("reconcile catching up with a backlog of changes", "pending_changes", rep.Pending,
				"reached", rep.Reached, "step_changes", l.cfg.Limit)
		}
		return loop.Next{}, nil
	}
	if !c.started.IsZero() {
		d := time.Since(c.started)
		l.cfg.Log.Info("reconcile caught up", "steps", c.steps, "changes", c.changes, "duration", d.Round(time.Millisecond).String(),
			"changes_per_second", int(float64(c.changes)/max(d.Seconds(), 0.001)))
		*c = catchUp{}
	}
	if rep.Pending > 0 {
		// Changes younger than the horizon wait: read them once settled.
		return loop.Next{Wait: min(l.cfg.Idle, l.cfg.Settle)}, nil
	}
	return loop.Next{Wait: l.cfg.Idle}, nil
}
