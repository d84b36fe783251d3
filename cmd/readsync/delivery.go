package main

import (
	"fmt"
	gosync "sync"
	"time"

	"github.com/readsync/readsync/sink"
)

// The states of delivery to ClickHouse, as readsync_delivery_state and the
// readiness probe name them.
const (
	deliveryOK          = "ok"          // the last attempt reached ClickHouse
	deliveryRefused     = "refused"     // ClickHouse answered and refused it (sink.Refused)
	deliveryUnavailable = "unavailable" // ClickHouse did not answer
)

// delivery is what the process knows of getting rows into ClickHouse: when
// rows last reached it, and how the last attempt (an INSERT or a
// migration) ended. A pass that fetched every name but spooled its rows
// looks fine from the passes alone; this is what says that nothing
// arrives. Safe for concurrent use.
type delivery struct {
	mu   gosync.Mutex
	last deliveryState
}

type deliveryState struct {
	// at is when rows last reached ClickHouse; zero for never.
	at time.Time
	// state is one of the delivery* constants; "" before any attempt.
	state string
	err   error
}

// observe records the outcome of an attempt.
func (d *delivery) observe(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch _, refused := sink.Refused(err); {
	case err == nil:
		d.last = deliveryState{at: time.Now(), state: deliveryOK}
	case refused:
		d.last.state, d.last.err = deliveryRefused, err
	default:
		d.last.state, d.last.err = deliveryUnavailable, err
	}
}

// state returns the last outcome.
func (d *delivery) state() deliveryState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// describeDBError says what went wrong with ClickHouse: when the server
// refused, that it did and what to do; otherwise the error as it is.
func describeDBError(err error) string {
	if fix, ok := sink.Refused(err); ok {
		return fmt.Sprintf("ClickHouse refused: %v; to fix: %s", err, fix)
	}
	return err.Error()
}
