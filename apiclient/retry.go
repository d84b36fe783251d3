package apiclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/readsync/readsync/internal/backoffpolicy"
)

// Retry policy defaults for Config fields left zero.
const (
	DefaultRetryBackoff = 500 * time.Millisecond
	// maxRetryAfter caps how long a Retry-After header can make us wait;
	// a server asking for an hour is better answered by the next pass.
	maxRetryAfter = 5 * time.Minute
)

// callbackError marks an error returned by the caller's function, which
// no retry can cure.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }

// retry runs attempt until it succeeds, fails for good or runs out of
// retries. Every attempt first waits for the rate limiter, so retries
// count against the process's request rate like any other request.
//
// What is retried: connection errors and resets, timeouts, HTTP 5xx, 408
// and 429, truncated or invalid bodies. A failure envelope is retried once:
// the upstream uses it for a name it does not know, which no retry changes,
// but also for passing trouble. Everything else (other 4xx, a body over the
// size limit, the caller's own errors) fails at once.
func (c *Client) retry(ctx context.Context, op string, attempt func() error, logAttrs ...any) error {
	b := backoffpolicy.New(c.backoff)
	attempts, envelopes := 0, 0
	var last error
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		attempts++
		if c.limiter != nil {
			if err := c.limiter.Wait(ctx); err != nil {
				return struct{}{}, backoff.Permanent(fmt.Errorf("waiting for the request rate limit: %w", err))
			}
		}
		start := time.Now()
		err := attempt()
		if c.observe != nil {
			c.observe(op, outcome(err), time.Since(start))
		}
		if err == nil {
			return struct{}{}, nil
		}
		last = err
		if ctx.Err() != nil {
			return struct{}{}, backoff.Permanent(err)
		}
		var env *EnvelopeError
		if errors.As(err, &env) {
			envelopes++
			if envelopes > 1 {
				return struct{}{}, backoff.Permanent(err)
			}
			return struct{}{}, err
		}
		return struct{}{}, classify(ctx, err)
	},
		backoff.WithBackOff(b),
		backoff.WithMaxTries(uint(c.maxRetries)+1),
		backoff.WithMaxElapsedTime(0), // the caller's deadline bounds the whole
		backoff.WithNotify(func(err error, wait time.Duration) {
			c.log.Warn("upstream request failed, retrying",
				append(logAttrs, "operation", op, "attempt", attempts, "wait_ms", wait.Milliseconds(), "err", err)...)
		}),
	)
	if err == nil {
		return nil
	}
	if last != nil && ctx.Err() != nil && !errors.Is(err, last) {
		// The caller's context ended while waiting to retry; the backoff
		// library then reports only that, but the last failure is the news.
		err = fmt.Errorf("%w; last attempt: %w", err, last)
	}
	if attempts > 1 {
		return &AttemptsError{Attempts: attempts, Err: err}
	}
	return err
}

// AttemptsError is a request's failure after more than one attempt: Err
// is what the last attempt met.
type AttemptsError struct {
	Attempts int
	Err      error
}

func (e *AttemptsError) Error() string {
	return fmt.Sprintf("after %d attempts: %v", e.Attempts, e.Err)
}
func (e *AttemptsError) Unwrap() error { return e.Err }

// Attempts returns how many requests the failure err took: 1 unless an
// AttemptsError in its chain says more.
func Attempts(err error) int {
	var a *AttemptsError
	if errors.As(err, &a) {
		return a.Attempts
	}
	return 1
}

// Outcome classes a request's error as the request metrics label it: ok,
// http_429, http_5xx, http_4xx, envelope, too_large, timeout, canceled,
// network or invalid_body. An error the caller's own callback raised is
// ok: the request itself succeeded.
func Outcome(err error) string { return outcome(err) }

// retryAfterError carries the server's requested wait to the backoff
// library while keeping the cause in the chain.
type retryAfterError struct {
	backoff.RetryAfterError
	cause error
}

func (e *retryAfterError) Error() string { return e.cause.Error() }
func (e *retryAfterError) Unwrap() []error {
	return []error{e.cause, &e.RetryAfterError}
}

// classify says whether err is worth another attempt: it returns err for a
// transient failure, err wrapped to carry the server's Retry-After, or a
// permanent error.
func classify(ctx context.Context, err error) error {
	var cb *callbackError
	if errors.As(err, &cb) || errors.Is(err, ErrResponseTooLarge) || errors.Is(err, errCrossOrigin) {
		return backoff.Permanent(err)
	}
	var se *StatusError
	if !errors.As(err, &se) {
		return err // network, timeout, truncated or malformed body
	}
	switch {
	case se.StatusCode == http.StatusTooManyRequests, se.StatusCode == http.StatusRequestTimeout, se.StatusCode >= 500:
	default:
		return backoff.Permanent(err)
	}
	wait, ok := parseRetryAfter(se.RetryAfter, time.Now())
	if !ok {
		return err
	}
	if d, has := ctx.Deadline(); has && time.Now().Add(wait).After(d) {
		return backoff.Permanent(fmt.Errorf("%w; the server asks to wait %s, past this pass's deadline", err, wait))
	}
	return &retryAfterError{RetryAfterError: backoff.RetryAfterError{Duration: wait}, cause: err}
}

// parseRetryAfter reads a Retry-After value, delay-seconds or an HTTP
// date, capped at maxRetryAfter. ok is false for an absent or malformed
// value, which falls back to the exponential backoff.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		d = time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}

// outcome names the result of one request attempt with a short, bounded
// word for Config.Observe.
func outcome(err error) string {
	var se *StatusError
	var env *EnvelopeError
	var cb *callbackError
	switch {
	case err == nil, errors.As(err, &cb):
		return "ok"
	case errors.As(err, &se):
		switch {
		case se.StatusCode == http.StatusTooManyRequests:
			return "http_429"
		case se.StatusCode >= 500:
			return "http_5xx"
		default:
			return "http_4xx"
		}
	case errors.As(err, &env):
		return "envelope"
	case errors.Is(err, ErrResponseTooLarge):
		return "too_large"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, new(*url.Error)), errors.As(err, new(*net.OpError)):
		return "network"
	default:
		// Everything else was raised while reading the body: cut short,
		// malformed, or not shaped like the spec.
		return "invalid_body"
	}
}
