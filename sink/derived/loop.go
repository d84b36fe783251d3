package derived

import (
	"context"
	"log/slog"
	"time"

	"github.com/readsync/readsync/internal/backoffpolicy"
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
	// daemons leave the work to it (see Lease).
	Owner string
	// Limit bounds the changes a step reads; DefaultStepChanges when 0.
	Limit int
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
// which never waits for it. It runs steps back to back while changes
// wait older than the horizon, so that any backlog drains, then sleeps
// until a Wake (a pass wrote), until the changes it left are old enough
// to read, or for Idle. A failed step is tried again after a growing
// wait. Run it once; Wake may be called from any goroutine.
type Loop struct {
	cfg  LoopConfig
	wake chan struct{}
}

// NewLoop returns a Loop; Run starts it.
func NewLoop(cfg LoopConfig) *Loop {
	if cfg.Limit <= 0 {
		cfg.Limit = DefaultStepChanges
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Observe == nil {
		cfg.Observe = func(StepReport, time.Duration, error) {}
	}
	return &Loop{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Wake makes the loop look for changes now, or as soon as its running
// step ends. It never blocks.
func (l *Loop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run runs the loop until ctx ends; a step under way then may finish
// within the Grace, and is cancelled after it. The next start resumes from
// the last step recorded.
func (l *Loop) Run(ctx context.Context) {
	retry := backoffpolicy.New(5 * time.Second)
	retry.MaxInterval = 5 * time.Minute
	var c catchUp
	for {
		wait := l.cfg.Idle
		if l.cfg.Ready() {
			var err error
			wait, err = l.drain(ctx, &c)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				wait = retry.NextBackOff()
				l.cfg.Log.Warn("reconcile step failed; the derived history waits for the next try", "err", err, "retry_in", wait.Round(time.Second).String())
			default:
				retry.Reset()
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-l.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// catchUp follows a backlog from the first step that did not drain it to
// the step that did.
type catchUp struct {
	started time.Time
	steps   int
	changes int
}

// drain runs steps until none waits older than the horizon, a step fails
// or another daemon holds the work, and returns how long to wait before
// looking again.
func (l *Loop) drain(ctx context.Context, c *catchUp) (time.Duration, error) {
	for ctx.Err() == nil {
		start := time.Now()
		rep, err := l.step(ctx)
		if ctx.Err() != nil && err != nil {
			return 0, ctx.Err() // stopped, not failed: the step is lost, and resumed at the next start
		}
		l.cfg.Observe(rep, time.Since(start), err)
		if err != nil {
			return 0, err
		}
		if rep.HeldBy != "" {
			// Another daemon runs the steps; look again within its lease.
			return min(l.cfg.Idle, Lease/2), nil
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
		if ctx.Err() != nil {
			return 0, ctx.Err() // stopped between two steps
		}
		if !rep.CaughtUp {
			if c.started.IsZero() {
				*c = catchUp{started: start, steps: 1, changes: rep.ChangedSnapshots + rep.ChangedTicks}
				l.cfg.Log.Info("reconcile catching up with a backlog of changes", "pending_changes", rep.Pending,
					"reached", rep.Reached, "step_changes", l.cfg.Limit)
			}
			continue
		}
		if !c.started.IsZero() {
			d := time.Since(c.started)
			l.cfg.Log.Info("reconcile caught up", "steps", c.steps, "changes", c.changes, "duration", d.Round(time.Millisecond).String(),
				"changes_per_second", int(float64(c.changes)/max(d.Seconds(), 0.001)))
			*c = catchUp{}
		}
		if rep.Pending > 0 {
			// Changes younger than the horizon wait: read them once settled.
			return min(l.cfg.Idle, l.cfg.Settle), nil
		}
		return l.cfg.Idle, nil
	}
	return 0, ctx.Err()
}

// step runs one step within its budget, on a context that outlives ctx by
// the Grace.
func (l *Loop) step(ctx context.Context) (StepReport, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.StepTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(l.cfg.Grace, cancel)
		context.AfterFunc(sctx, func() { t.Stop() })
	})
	defer stop()
	return l.cfg.Steps.ReconcileStep(sctx, l.cfg.Owner, l.cfg.Limit)
}
