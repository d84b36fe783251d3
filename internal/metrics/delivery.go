package metrics

import (
	gosync "sync"
	"time"

	"github.com/readsync/readsync/sink"
)

// The states of delivery to ClickHouse, as readsync_delivery_state and the
// readiness probe name them.
const (
	DeliveryOK          = "ok"          // the last attempt reached ClickHouse
	DeliveryRefused     = "refused"     // ClickHouse answered and refused it (sink.Refused)
	DeliveryUnavailable = "unavailable" // ClickHouse did not answer
)

// delivery is what the process knows of getting rows into ClickHouse: when
// rows last reached it, and how the last attempt (an INSERT or a
// migration) ended. A pass that fetched every name but spooled its rows
// looks fine from the passes alone; this is what says that nothing
// arrives. Safe for concurrent use.
type delivery struct {
	mu   gosync.Mutex
	last DeliveryState
}

// DeliveryState is how the last attempt to write to ClickHouse ended.
type DeliveryState struct {
	// At is when rows last reached ClickHouse; zero for never.
	At time.Time
	// State is one of the Delivery* constants; "" before any attempt.
	State string
	// Err is the last attempt's error, when it failed.
	Err error
}

// observe records the outcome of an attempt.
func (d *delivery) observe(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch _, refused := sink.Refused(err); {
	case err == nil:
		d.last = DeliveryState{At: time.Now(), State: DeliveryOK}
	case refused:
		d.last.State, d.last.Err = DeliveryRefused, err
	default:
		d.last.State, d.last.Err = DeliveryUnavailable, err
	}
}

// state returns the last outcome.
func (d *delivery) state() DeliveryState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}
