// Package backoffpolicy is readsync's one policy for the wait between two
// attempts of a failed operation, upstream requests and database writes
// alike: exponential, doubling from a configured first wait, with jitter,
// capped.
package backoffpolicy

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// MaxInterval caps the wait between two attempts: past it, a failure is
// better answered by the next pass than by waiting longer within this one.
const MaxInterval = 30 * time.Second

// New returns the policy's backoff, starting at initial. Each call returns
// a fresh one: a backoff keeps state and belongs to one operation.
func New(initial time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval: initial,
		// Jitter keeps the names of a pass that failed together from
		// retrying together.
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         MaxInterval,
	}
}
