package sync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/readsync/readsync/internal/backoffpolicy"
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
	sink     sink.Writer
	spool    Spool // nil: nowhere to fall back to
	attempts int
	backoff  time.Duration
	log      *slog.Logger
	// down is set when a write had to be spooled and cleared by the next
	// success: while the database is known to be down, each write gets one
	// attempt, so an outage does not slow the pass by a backoff per batch.
	down bool
	// spoolCause is why the first rows of the pass were spooled, for its
	// run record.
	spoolCause error
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
	s.spooled(err, "rows spooled: the database did not take them", "rows", b.Len())
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
	s.spooled(err, "run record spooled: the database did not take it")
	return spooled, nil
}

// spooled says why something went to the spool: at error level when the
// database refused it (an operator must act; see sink.Refused), else as a
// warning (it will answer again).
func (s *store) spooled(err error, msg string, attrs ...any) {
	if s.spoolCause == nil {
		s.spoolCause = err
	}
	s.down = true
	if fix, refused := sink.Refused(err); refused {
		s.log.Error(msg+"; ClickHouse refused them", append(attrs, "err", err, "fix", fix)...)
		return
	}
	s.log.Warn(msg, append(attrs, "err", err)...)
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
	b := backoffpolicy.New(s.backoff)
	attempts := s.attempts
	if s.down {
		attempts = 1
	}
	var last error
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		actx, cancel := context.WithTimeout(ctx, writeTimeout)
		defer cancel()
		last = op(actx)
		if _, refused := sink.Refused(last); refused {
			// The same statement meets the same answer: to the spool now.
			return struct{}{}, backoff.Permanent(last)
		}
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

// stage holds one name's rows on one fetch worker until they join the
// shared batch. A short list's rows join it at once when the list has
// completed. A long list streams through in pieces of spill rows: its
// project and message rows join the shared batch as they come (an early
// write of them is harmless, since the complete list writes them again
// with a newer version), while its snapshot rows wait in a spill file on
// disk and join the batch only once the list has arrived whole.
type stage struct {
	w     *writer
	spill int
	nft   string
	rows  sink.Batch
	snaps spillFile
}

func (s *stage) begin(nft string) {
	s.nft = nft
	s.rows.Reset()
	s.snaps.reset()
}

func (s *stage) maybeSpill() error {
	if s.rows.Len() < s.spill {
		return nil
	}
	held := len(s.rows.Snapshots)
	if err := s.snaps.put(s.rows.Snapshots); err != nil {
		return err
	}
	s.rows.Snapshots = s.rows.Snapshots[:0]
	s.w.add(s.nft, &s.rows, held)
	s.rows.Reset()
	return nil
}

// restart drops what a failed attempt of the list staged, for an attempt
// that delivers the list again from its start.
func (s *stage) restart() {
	s.rows.Messages, s.rows.Snapshots = s.rows.Messages[:0], s.rows.Snapshots[:0]
	s.snaps.reset()
}

// commit hands the name's remaining rows to the writer, the spilled
// snapshots first, all in one batch unless they fill it.
func (s *stage) commit() error {
	s.w.committing.RLock()
	defer s.w.committing.RUnlock()
	err := s.snaps.each(func(rows []sink.Snapshot) {
		// These rows were counted while they waited on disk.
		s.w.add(s.nft, &sink.Batch{Snapshots: rows}, -len(rows))
	})
	if err != nil {
		s.abort()
		return err
	}
	s.w.add(s.nft, &s.rows, 0)
	s.rows.Reset()
	return nil
}

func (s *stage) abort() {
	s.rows.Reset()
	s.snaps.reset()
}

// writer gathers the rows of many names into one shared batch and hands it
// to a background flusher when it is full, or when its first rows have
// waited the batch timeout, so a pass makes a few large INSERTs rather
// than one per name, fetching goes on while a batch is written, and rows
// fetched reach the database within the timeout however long the pass.
// At most two batches exist: one filling while the other is written. When
// the filling one is full before the other is written, add blocks: the
// back-pressure that bounds a pass's memory whatever the size of its lists.
type writer struct {
	ctx   context.Context
	store *store
	limit int
	// byteLimit hands a batch over once its rows hold that much memory
	// (sink.Batch.Bytes), however few they are: a project row with its raw
	// record weighs as much as a dozen snapshot rows.
	byteLimit int
	// timeout is how long rows may wait in the filling batch.
	timeout time.Duration
	// schedule is the pass's, which every batch carries (sink.Batch).
	schedule string
	// pass is what the rows of the names' outcomes say of the pass.
	pass passInfo
	log  *slog.Logger

	// committing is held for reading while a name's rows join the batch,
	// which may take several adds (a long list's snapshots come back from
	// disk in pieces): a batch handed over for its age must not split a
	// project's rows at a tick between two INSERTs.
	committing gosync.RWMutex

	mu      gosync.Mutex // guards batch, held, names and started; held while waiting for room
	batch   *sink.Batch
	held    int                 // rows counted towards batch that wait on disk
	bytes   int                 // what batch's rows hold, by sink.Batch.Bytes
	names   map[string]struct{} // names with rows in batch
	started time.Time           // when batch got its first rows
	full    chan fullBatch      // unbuffered: a send waits for the flusher
	// idle is true while the flusher waits for a batch (run): a hint, as
	// a batch may have reached it since, which handOffWhenIdle checks.
	idle atomic.Bool

	fetched atomic.Int64 // rows handed to add, for progress reports

	resMu     gosync.Mutex // guards the results below
	failedSet map[string]bool
	failed    []NameError
	rows      int // rows written to the sink
	snapshots int // snapshot rows written or spooled
	spooled   int // rows spooled
}

type fullBatch struct {
	b     *sink.Batch
	names []string
}

func newWriter(ctx context.Context, st *store, limit, byteLimit int, timeout time.Duration, schedule string, log *slog.Logger) *writer {
	w := &writer{
		ctx:       ctx,
		schedule:  schedule,
		store:     st,
		limit:     limit,
		byteLimit: byteLimit,
		timeout:   timeout,
		log:       log,
		batch:     &sink.Batch{Schedule: schedule},
		names:     make(map[string]struct{}),
		full:      make(chan fullBatch),
		failedSet: make(map[string]bool),
	}
	return w
}

// add copies rows of the name nft into the shared batch, handing the batch
// to the flusher when it is full. held counts rows that came with these but
// wait on disk (see stage): they count towards the batch as if they were
// in it, so that a batch of a long list's message rows alone holds no more
// rows' worth of memory than a batch of messages and snapshots would; a
// negative held says that rows counted so have arrived.
func (w *writer) add(nft string, rows *sink.Batch, held int) {
	if rows.Len() == 0 {
		return
	}
	w.fetched.Add(int64(rows.Len()))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.batch.Len()+w.batch.Outcomes() == 0 {
		w.started = time.Now()
	}
	w.batch.Projects = append(w.batch.Projects, rows.Projects...)
	w.batch.Messages = append(w.batch.Messages, rows.Messages...)
	w.batch.Snapshots = append(w.batch.Snapshots, rows.Snapshots...)
	w.names[nft] = struct{}{}
	w.held = max(w.held+held, 0) // a hand-off in between forgot them
	w.bytes += rows.Bytes()
	w.handOffWhenFull()
}

// handOffWhenFull hands the batch over when it holds its limit of data
// rows or of bytes: the names' outcome rows, small, count by their bytes
// only, so that they leave the batches of data rows as they were. The
// caller holds mu.
func (w *writer) handOffWhenFull() {
	if w.batch.Len()+w.held >= w.limit || w.bytes >= w.byteLimit {
		w.handOff()
	}
}

// recordOutcome adds the row of the name nft's outcome in the pass to the
// batch: a failure with err, or a success when err is nil. It joins the
// batch after the name's rows, so that a success is never recorded
// without them.
func (w *writer) recordOutcome(nft string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.batch.Len()+w.batch.Outcomes() == 0 {
		w.started = time.Now()
	}
	var row sink.Batch
	if err != nil {
		row.NameFailures = []sink.NameFailure{failureRow(w.pass, nft, err)}
	} else {
		row.NameSuccesses = []sink.NameSuccess{{NFT: nft, SnapshotAt: w.pass.snapshotAt}}
	}
	w.batch.NameFailures = append(w.batch.NameFailures, row.NameFailures...)
	w.batch.NameSuccesses = append(w.batch.NameSuccesses, row.NameSuccesses...)
	w.bytes += row.Bytes()
	w.handOffWhenFull()
	w.handOffWhenIdle()
}

// handOffWhenIdle hands the batch over before it is full when the flusher
// waits for one and the batch holds two thirds of its limit of rows or
// bytes. The rows that arrive while it is written make the next batch:
// the flusher works while the pass fetches instead of waiting for a full
// batch, and the batch left to write once the fetches end, which the pass
// waits for, is smaller, as is the memory two batches hold. Two thirds
// bound the cost: at most half again as many INSERTs as full batches. It
// runs once a name's rows and outcome have joined the batch, and not
// while another name's rows are joining it (committing), so that no name
// is split between two batches to save time. The caller holds mu.
func (w *writer) handOffWhenIdle() {
	early := w.batch.Len()+w.held >= w.limit*2/3 || w.bytes >= w.byteLimit*2/3
	if !early || !w.idle.Load() {
		return
	}
	// Never waited for: a commit waiting for mu holds committing.
	if !w.committing.TryLock() {
		return
	}
	defer w.committing.Unlock()
	select {
	case w.full <- w.current():
		w.reset()
	default:
		// The flusher is not at its wait after all (it is about to
		// reach it, or woke for its timer): this batch goes on filling.
	}
}

// handOff queues the current batch for writing, waiting until the flusher
// is done with the previous one, and starts an empty one. The caller
// holds mu.
func (w *writer) handOff() { w.full <- w.take() }

// take returns the current batch and starts an empty one. A written batch
// is left to the garbage collector rather than reused: its arrays, sized by
// the largest batch so far, would keep that memory, and the strings still
// referenced beyond their length, for the rest of the process. The caller
// holds mu.
func (w *writer) take() fullBatch {
	fb := w.current()
	w.reset()
	return fb
}

// current returns the current batch and the names with rows in it,
// leaving both in place. The caller holds mu.
func (w *writer) current() fullBatch {
	names := make([]string, 0, len(w.names))
	for n := range w.names {
		names = append(names, n)
	}
	return fullBatch{b: w.batch, names: names}
}

// reset starts an empty batch. The caller holds mu.
func (w *writer) reset() {
	clear(w.names)
	w.batch, w.held, w.bytes = &sink.Batch{Schedule: w.schedule}, 0, 0
}

// takeDue returns the current batch when its first rows have waited the
// timeout and no name's rows are joining it.
func (w *writer) takeDue() (fullBatch, bool) {
	// A commit holds committing, and an add holds mu, while it may wait
	// for this flusher to take a full batch: waiting for either here
	// would wait for ourselves. The next tick tries again.
	if !w.committing.TryLock() {
		return fullBatch{}, false
	}
	defer w.committing.Unlock()
	if !w.mu.TryLock() {
		return fullBatch{}, false
	}
	defer w.mu.Unlock()
	if w.batch.Len()+w.batch.Outcomes() == 0 || time.Since(w.started) < w.timeout {
		return fullBatch{}, false
	}
	return w.take(), true
}

// close hands over what is left and ends run once it is stored. Nothing
// may be added after close.
func (w *writer) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.batch.Len()+w.batch.Outcomes() > 0 {
		w.handOff()
	}
	close(w.full)
}

// run stores the batches handed over until close, and the filling batch
// when its rows have waited the timeout. The pass starts it and waits for
// it: the results are complete when run has returned.
func (w *writer) run() {
	// A tenth of the timeout keeps the wait within a tenth of it, with no
	// more than a few checks a second.
	t := time.NewTicker(min(max(w.timeout/10, 10*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		w.idle.Store(true)
		select {
		case fb, ok := <-w.full:
			w.idle.Store(false)
			if !ok {
				return
			}
			w.flush(fb)
		case <-t.C:
			w.idle.Store(false)
			if fb, ok := w.takeDue(); ok {
				w.log.Debug("batch handed over after the batch timeout", "rows", fb.b.Len(), "timeout", w.timeout.String())
				w.flush(fb)
			}
		}
	}
}

// flush stores one batch. Rows neither written nor spooled fail every name
// with rows in the batch: their snapshots are lost, and the run record
// must say so.
func (w *writer) flush(fb fullBatch) {
	n, snaps := fb.b.Len(), len(fb.b.Snapshots)
	out, err := w.store.write(w.ctx, fb.b)
	w.resMu.Lock()
	defer w.resMu.Unlock()
	switch out {
	case written:
		w.rows += n
		w.snapshots += snaps
		w.log.Debug("batch written", "rows", n, "names", len(fb.names))
	case spooled:
		w.spooled += n
		w.snapshots += snaps
	default:
		slices.Sort(fb.names)
		for _, nft := range fb.names {
			w.failLocked(nft, err)
		}
	}
}

// fail records that the name nft failed; a name is reported once.
func (w *writer) fail(nft string, err error) {
	w.resMu.Lock()
	defer w.resMu.Unlock()
	w.failLocked(nft, err)
}

func (w *writer) failLocked(nft string, err error) {
	if w.failedSet[nft] {
		return
	}
	w.failedSet[nft] = true
	ne := NameError{NFT: nft, Err: err}
	w.failed = append(w.failed, ne)
	if !ne.CutOff() {
		w.log.Error("name failed", "nft", nft, "err", err)
	}
}
