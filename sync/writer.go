package sync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/readsync/readsync/sink"
)

// Spool keeps rows the sink did not take, to be replayed later.
type Spool interface {
	PutBatch(b *sink.Batch) error
	PutRun(r sink.Run) error
}

// ErrShutdown is the cause to cancel a pass's context with when the process
// is stopping: rows not yet written then go straight to the spool instead
// of waiting on the database.
var ErrShutdown = errors.New("shutting down")

// writeTimeout bounds one write attempt, so a hung database cannot hold a
// pass forever.
const writeTimeout = 2 * time.Minute

// store is how a pass gets rows and run records into the sink: a few
// attempts with backoff, then the spool.
type store struct {
	sink     Sink
	spool    Spool // nil: nowhere to fall back to
	attempts int
	backoff  time.Duration
	log      *slog.Logger
	// down is set when a write had to be spooled and cleared by the next
	// success: while the database is known to be down, each write gets one
	// attempt, so an outage does not slow the pass by a backoff per batch.
	down bool
}

// outcome says where rows went.
type outcome int

const (
	written outcome = iota
	spooled
	lost
)

// write stores b. It returns spooled when the sink refused b but the spool
// kept it, and lost with the reasons when neither took it.
func (s *store) write(ctx context.Context, b *sink.Batch) (outcome, error) {
	err := s.try(ctx, func(ctx context.Context) error { return s.sink.Write(ctx, b) })
	if err == nil {
		return written, nil
	}
	if s.spool == nil {
		return lost, fmt.Errorf("write rows: %w", err)
	}
	if serr := s.spool.PutBatch(b); serr != nil {
		return lost, fmt.Errorf("write rows: %w; and %w", err, serr)
	}
	s.log.Warn("rows spooled: the database did not take them", "rows", b.Len(), "err", err)
	s.down = true
	return spooled, nil
}

// recordRun stores a run record the same way.
func (s *store) recordRun(ctx context.Context, r sink.Run) (outcome, error) {
	err := s.try(ctx, func(ctx context.Context) error { return s.sink.RecordRun(ctx, r) })
	if err == nil {
		return written, nil
	}
	if s.spool == nil {
		return lost, err
	}
	if serr := s.spool.PutRun(r); serr != nil {
		return lost, fmt.Errorf("%w; and %w", err, serr)
	}
	s.log.Warn("run record spooled: the database did not take it", "err", err)
	s.down = true
	return spooled, nil
}

// try runs op until it succeeds or the attempts are spent. Rows fetched
// deserve a write even when the pass has run out of time, and without a
// spool the write must finish whatever happens to the pass. On shutdown
// with a spool at hand, the spool, local and fast, is the place for them.
func (s *store) try(ctx context.Context, op func(context.Context) error) error {
	switch {
	case ctx.Err() != nil && s.spool != nil && errors.Is(context.Cause(ctx), ErrShutdown):
		return fmt.Errorf("not written: %w", context.Cause(ctx))
	case ctx.Err() != nil, s.spool == nil:
		ctx = context.WithoutCancel(ctx)
	}
	b := &backoff.ExponentialBackOff{
		InitialInterval:     s.backoff,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         30 * time.Second,
	}
	attempts := s.attempts
	if s.down {
		attempts = 1
	}
	var last error
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		actx, cancel := context.WithTimeout(ctx, writeTimeout)
		defer cancel()
		last = op(actx)
		return struct{}{}, last
	}, backoff.WithBackOff(b), backoff.WithMaxTries(uint(attempts)), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, wait time.Duration) {
			s.log.Warn("database write failed, retrying", "wait_ms", wait.Milliseconds(), "err", err)
		}))
	if err != nil && last != nil && !errors.Is(err, last) {
		err = fmt.Errorf("%w; last attempt: %w", err, last)
	}
	if err == nil {
		s.down = false
	}
	return err
}

// writer gathers the rows of many names into one batch and stores it when
// it is full, so a pass makes a few large INSERTs rather than one per name.
type writer struct {
	store     *store
	limit     int
	log       *slog.Logger
	batch     sink.Batch
	pending   []string // names whose rows are in batch
	failed    []NameError
	rows      int // rows written to the sink
	snapshots int // snapshot rows written or spooled
	spooled   int // rows spooled
}

func (w *writer) add(ctx context.Context, r result) {
	if r.err != nil {
		w.fail(r.nft, r.err)
		return
	}
	w.batch.Projects = append(w.batch.Projects, r.rows.Projects...)
	w.batch.Messages = append(w.batch.Messages, r.rows.Messages...)
	w.batch.Snapshots = append(w.batch.Snapshots, r.rows.Snapshots...)
	w.pending = append(w.pending, r.nft)
	if w.batch.Len() >= w.limit {
		w.flush(ctx)
	}
}

// flush stores the batch. Rows neither written nor spooled fail every name
// in the batch: their snapshots are lost, and the run record must say so.
func (w *writer) flush(ctx context.Context) {
	if len(w.pending) == 0 {
		return
	}
	n, snaps := w.batch.Len(), len(w.batch.Snapshots)
	switch out, err := w.store.write(ctx, &w.batch); out {
	case written:
		w.rows += n
		w.snapshots += snaps
		w.log.Debug("batch written", "rows", n, "names", len(w.pending))
	case spooled:
		w.spooled += n
		w.snapshots += snaps
	default:
		for _, nft := range w.pending {
			w.fail(nft, err)
		}
	}
	w.batch.Reset()
	w.pending = w.pending[:0]
}

func (w *writer) fail(nft string, err error) {
	w.failed = append(w.failed, NameError{NFT: nft, Err: err})
	w.log.Error("name failed", "nft", nft, "err", err)
}
