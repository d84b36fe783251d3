// Package loop runs the daemon's background work: the reconcile, the move
// of the snapshot table onto its sort key, expiry and the reading of every
// name's health. Each is a loop of its own beside the passes, which never
// wait for it: it starts once its database is ready, runs a bounded step,
// waits as long as the step says (or until woken), tries a failed step
// again after a growing wait, and stops with its context, letting a step
// under way finish within a grace.
package loop

import (
	"context"
	"time"

	"github.com/readsync/readsync/internal/backoffpolicy"
)

// Next is what a step says of the one after it: run it after Wait (at
// once when zero, unless Done), or never again when Done.
type Next struct {
	Wait time.Duration
	Done bool
}

// Step does one bounded piece of the work. An error makes the runner try
// again after a growing wait; a step that ends because its context did is
// not a failure.
type Step func(ctx context.Context) (Next, error)

// Config is how a Runner paces its steps.
type Config struct {
	// Ready reports whether the work may start (the schema is migrated);
	// nil is always. Until it does, the runner looks again every
	// ReadyEvery.
	Ready      func() bool
	ReadyEvery time.Duration
	// Timeout is each step's own budget; zero leaves it to the context.
	Timeout time.Duration
	// Grace is how long a step under way when Run's context ends may go
	// on, so that a server is not left with a statement its client
	// dropped; zero cancels it with the context.
	Grace time.Duration
	// Retry is the wait after a first failure, doubling with jitter up
	// to MaxRetry (backoffpolicy's).
	Retry, MaxRetry time.Duration
	// Failed, when set, is told of each failed step and the wait before
	// the next try.
	Failed func(err error, retryIn time.Duration)
}

// Runner runs one loop. Run it once; Wake may be called from any
// goroutine.
type Runner struct {
	cfg  Config
	wake chan struct{}
}

// New returns a Runner; Run starts it.
func New(cfg Config) *Runner {
	return &Runner{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Wake makes the loop run its next step now, or as soon as the step
// under way ends. It never blocks.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run runs step until it is done or ctx ends. It returns when the last
// step has returned.
func (r *Runner) Run(ctx context.Context, step Step) {
	retry := backoffpolicy.New(r.cfg.Retry)
	retry.MaxInterval = r.cfg.MaxRetry
	for {
		wait := r.cfg.ReadyEvery
		if r.cfg.Ready == nil || r.cfg.Ready() {
			next, err := r.run(ctx, step)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				wait = retry.NextBackOff()
				if r.cfg.Failed != nil {
					r.cfg.Failed(err, wait)
				}
			case next.Done:
				return
			default:
				retry.Reset()
				wait = next.Wait
			}
		}
		if wait <= 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// run runs one step within its budget, on a context that outlives ctx by
// the grace.
func (r *Runner) run(ctx context.Context, step Step) (Next, error) {
	if r.cfg.Timeout <= 0 && r.cfg.Grace <= 0 {
		return step(ctx)
	}
	var (
		sctx   context.Context
		cancel context.CancelFunc
	)
	if r.cfg.Timeout > 0 {
		sctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
	} else {
		sctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(r.cfg.Grace, cancel)
		context.AfterFunc(sctx, func() { t.Stop() })
	})
	defer stop()
	return step(sctx)
}
