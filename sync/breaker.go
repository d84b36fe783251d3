package sync

import (
	"fmt"
	gosync "sync"

	"github.com/readsync/readsync/apiclient"
)

// BreakerThreshold is how many names in a row must fail for want of an
// answer from the upstream before a pass stops asking it. Five, like the
// consecutive-5xx default of Envoy's outlier detection: enough that a few
// broken names together are not taken for an outage, few enough that a
// pass of thousands of names stops within its first wave of requests.
const BreakerThreshold = 5

// Breaker is a pass's circuit breaker on the upstream. Its rule:
//
//   - It trips once BreakerThreshold names in a row have failed with an
//     error apiclient.Unavailable reports (connection refused or reset, host
//     not found, no response within the request timeout, HTTP 5xx or 429),
//     each after its own retries, with no name succeeding in between.
//   - Any name that succeeds, or fails with an answer from the upstream (a
//     failure envelope, another 4xx, a malformed body), starts the count
//     again: the upstream is there.
//   - Once tripped it stays open for the rest of the pass, which asks for no
//     more names; the next pass starts with a closed breaker and so tries
//     again.
//
// It counts names, not requests: a name's retries follow the client's own
// rules, and a name fails only when all of them did, so faults that a
// retry cures (even most requests failing at random) never trip it, and
// neither does one broken name among working ones.
//
// A Breaker is safe for concurrent use; each name is recorded once.
type Breaker struct {
	observe func(open bool)

	mu        gosync.Mutex
	run       int   // names failed in a row for want of an upstream
	last      error // the last of them
	cause     *OutageError
	succeeded bool // a name has succeeded since the breaker was made
}

// NewBreaker returns a closed breaker. observe, when not nil, is called
// with true when it trips and with false when the first name succeeds, so
// that a gauge can show the upstream's state across passes.
func NewBreaker(observe func(open bool)) *Breaker {
	return &Breaker{observe: observe}
}

// Record notes how one name ended, nil for success, and reports whether
// that tripped the breaker; Cause then says why.
func (b *Breaker) Record(err error) (tripped bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cause != nil {
		return false
	}
	if !apiclient.Unavailable(err) {
		b.run, b.last = 0, nil
		if err == nil && !b.succeeded {
			b.succeeded = true
			b.notify(false)
		}
		return false
	}
	b.run++
	b.last = err
	if b.run < BreakerThreshold {
		return false
	}
	b.cause = &OutageError{Names: b.run, Last: b.last}
	b.notify(true)
	return true
}

func (b *Breaker) notify(open bool) {
	if b.observe != nil {
		b.observe(open)
	}
}

// Cause is the error the names not asked for fail with once the breaker
// has tripped, and nil before.
func (b *Breaker) Cause() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cause == nil {
		return nil
	}
	return b.cause
}

// OutageError is why a pass stopped asking the upstream: Names names in a
// row failed for want of an answer, the last of them with Last.
type OutageError struct {
	Names int
	Last  error
}

func (e *OutageError) Error() string {
	return fmt.Sprintf("upstream unavailable: %d names in a row failed with no answer from it, the last with %v; "+
		"not asked in this pass, the next pass asks again", e.Names, e.Last)
}

// Unwrap returns the last failure.
func (e *OutageError) Unwrap() error { return e.Last }
