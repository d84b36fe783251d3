package loop_test

import (
	"context"
	"errors"
	gosync "sync"
	"testing"
	"time"

	"github.com/readsync/readsync/internal/loop"
)

// run starts r.Run(ctx, step) and returns a function that cancels ctx and
// waits for Run to return.
func run(t *testing.T, r *loop.Runner, step loop.Step) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg gosync.WaitGroup
	wg.Go(func() { r.Run(ctx, step) })
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// receive waits for a value from ch, failing the test after a minute.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("no %s within a minute", what)
		panic("unreachable")
	}
}

// Steps run back to back while they ask for no wait, until one is done;
// nothing runs before the work is ready.
func TestStepsRunUntilDone(t *testing.T) {
	var ready gosync.Mutex
	ready.Lock()
	isReady := func() bool {
		if ready.TryLock() {
			ready.Unlock()
			return true
		}
		return false
	}
	steps := make(chan int, 10)
	n := 0
	r := loop.New(loop.Config{Ready: isReady, ReadyEvery: time.Millisecond})
	finished := make(chan struct{})
	go func() {
		r.Run(context.Background(), func(context.Context) (loop.Next, error) {
			n++
			steps <- n
			return loop.Next{Done: n == 3}, nil
		})
		close(finished)
	}()
	select {
	case <-steps:
		t.Fatal("a step ran before the work was ready")
	case <-time.After(20 * time.Millisecond):
	}
	ready.Unlock()
	for want := 1; want <= 3; want++ {
		if got := receive(t, steps, "step"); got != want {
			t.Fatalf("step %d ran, want %d", got, want)
		}
	}
	receive(t, finished, "return of Run after the last step")
}

// A failed step is tried again after the retry wait, which Failed is
// told of; a success resets it.
func TestFailedStepsAreRetried(t *testing.T) {
	type failure struct {
		err  error
		wait time.Duration
	}
	failures := make(chan failure, 10)
	boom := errors.New("boom")
	steps := make(chan int, 10)
	n := 0
	r := loop.New(loop.Config{Retry: time.Millisecond, MaxRetry: 4 * time.Millisecond,
		Failed: func(err error, wait time.Duration) { failures <- failure{err, wait} }})
	run(t, r, func(context.Context) (loop.Next, error) {
		n++
		steps <- n
		if n <= 3 {
			return loop.Next{}, boom
		}
		return loop.Next{Done: true}, nil
	})
	for i := range 3 {
		f := receive(t, failures, "failure")
		// The cap bounds the wait before its jitter of up to a half.
		if !errors.Is(f.err, boom) || f.wait <= 0 || f.wait > 6*time.Millisecond {
			t.Errorf("failure %d: %v, retry in %s; want boom within the cap and its jitter", i+1, f.err, f.wait)
		}
	}
	for want := 1; want <= 4; want++ {
		if got := receive(t, steps, "step"); got != want {
			t.Fatalf("step %d ran, want %d", got, want)
		}
	}
}

// Wake cuts a step's wait short.
func TestWakeRunsTheNextStepNow(t *testing.T) {
	steps := make(chan struct{}, 10)
	r := loop.New(loop.Config{})
	run(t, r, func(context.Context) (loop.Next, error) {
		steps <- struct{}{}
		return loop.Next{Wait: time.Hour}, nil
	})
	receive(t, steps, "first step")
	r.Wake()
	receive(t, steps, "step after Wake")
}

// A step under way when the loop stops goes on within the grace, then is
// cancelled; Run returns when it has.
func TestAStepUnderWayHasItsGrace(t *testing.T) {
	for _, tt := range []struct {
		name      string
		grace     time.Duration
		cancelled bool
	}{
		{"within the grace", time.Hour, false},
		{"past the grace", time.Millisecond, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			started, finish := make(chan struct{}), make(chan struct{})
			var stepErr error
			r := loop.New(loop.Config{Timeout: time.Hour, Grace: tt.grace})
			stop := run(t, r, func(ctx context.Context) (loop.Next, error) {
				close(started)
				select {
				case <-ctx.Done():
					stepErr = ctx.Err()
				case <-finish:
				}
				return loop.Next{Done: true}, nil
			})
			receive(t, started, "step")
			stopped := make(chan struct{})
			go func() { stop(); close(stopped) }()
			if !tt.cancelled {
				select {
				case <-stopped:
					t.Fatal("Run returned with its step under way")
				case <-time.After(20 * time.Millisecond):
				}
				close(finish)
			}
			receive(t, stopped, "return of Run")
			if got := stepErr != nil; got != tt.cancelled {
				t.Errorf("the step's context ended: %t (%v), want %t", got, stepErr, tt.cancelled)
			}
		})
	}
}
