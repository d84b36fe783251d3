// Package sync runs passes: for each nft name, fetch the project's details
// and its sent-message list, turn them into rows, and hand the rows of all
// names to a sink in large shared batches. One failing name never stops the
// others; every pass leaves a run record.
package sync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/sink"
)

// Source is the upstream API as a pass needs it.
type Source interface {
	ProjectDetails(ctx context.Context, nft string) (apiclient.Project, error)
	// ListMessages streams a project's messages to fn; restart is called
	// before a retried attempt delivers them again from the start.
	ListMessages(ctx context.Context, projectID int64, fn func(apiclient.Message) error, restart func()) error
}

// Triggers recorded in sync_runs.trigger.
const (
	TriggerCron     = "cron"
	TriggerBackfill = "backfill"
)

// Run statuses recorded in sync_runs.status.
const (
	StatusOK      = "ok"
	StatusPartial = "partial"
	StatusFailed  = "failed"
	// StatusSkipped is a cron tick not run because the schedule's previous
	// pass still ran; StatusMissed one not run because readsync was not
	// running. Neither has a pass: their records account for the tick.
	StatusSkipped = "skipped"
	StatusMissed  = "missed"
)

// Defaults for Config fields left zero.
const (
	DefaultConcurrency   = 8
	DefaultBatchRows     = 50_000
	DefaultBatchBytes    = 8 << 20
	DefaultWriteAttempts = 3
	DefaultWriteBackoff  = time.Second
	DefaultBatchTimeout  = 30 * time.Second
)

// Config configures a Syncer. Source and Sink are required.
type Config struct {
	Source Source
	Sink   sink.Writer
	// Spool, when set, keeps the rows and run records the sink still
	// refuses after WriteAttempts tries.
	Spool Spool
	// WriteAttempts is how often a write is tried before the rows go to
	// the spool; WriteBackoff is the first wait between two tries.
	WriteAttempts int
	WriteBackoff  time.Duration
	// Concurrency is how many names are in flight at once.
	Concurrency int
	// BatchRows is how many rows are gathered before an INSERT.
	BatchRows int
	// BatchBytes bounds the memory a batch's rows hold (sink.Batch.Bytes):
	// a batch is written once it has BatchRows rows or BatchBytes bytes,
	// so that rows of long texts hold no more memory than snapshots do;
	// and once it has two thirds of either when no other batch is being
	// written (writer.handOffWhenIdle).
	BatchBytes int
	// BatchTimeout is how long fetched rows wait before an INSERT when a
	// batch fills slowly: a pass cut off, however, loses no more than
	// that much of what it fetched.
	BatchTimeout time.Duration
	// SpillDir is where the snapshot rows of a long list wait until the
	// list has arrived whole; empty means the system's temporary directory.
	// The files are unlinked at creation and take no name in the directory.
	SpillDir string
	// Location is the zone the API's create_at times are written in.
	Location *time.Location
	Logger   *slog.Logger
	// ObserveBreaker, when set, is told when a pass's breaker trips (true)
	// and when a pass's first name succeeds (false); see Breaker.
	ObserveBreaker func(open bool)
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Syncer runs passes. It is safe to run several passes at once; row
// versions stay strictly increasing across all of them.
type Syncer struct {
	cfg     Config
	version atomic.Uint64
}

// New returns a Syncer, filling in defaults for zero fields of cfg.
func New(cfg Config) *Syncer {
	if cfg.Concurrency < 1 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.BatchRows < 1 {
		cfg.BatchRows = DefaultBatchRows
	}
	if cfg.BatchBytes < 1 {
		cfg.BatchBytes = DefaultBatchBytes
	}
	if cfg.BatchTimeout <= 0 {
		cfg.BatchTimeout = DefaultBatchTimeout
	}
	if cfg.WriteAttempts < 1 {
		cfg.WriteAttempts = DefaultWriteAttempts
	}
	if cfg.WriteBackoff <= 0 {
		cfg.WriteBackoff = DefaultWriteBackoff
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Syncer{cfg: cfg}
}

// Pass describes one pass.
type Pass struct {
	// Names are the nft names to sync; repeats are fetched once.
	Names []string
	// Schedule names the schedule the pass runs for, empty for a backfill
	// over several schedules.
	Schedule string
	// Trigger is TriggerCron or TriggerBackfill.
	Trigger string
	// SnapshotAt stamps every snapshot row; zero means the pass start. It is
	// stored in UTC, whole seconds.
	SnapshotAt time.Time
	// Shard is the share of the schedule's names the process takes ("i/n"),
	// recorded with the run; empty when it takes every name.
	Shard string
	// Progress, when set, is called each time a name is done, from the
	// goroutine that fetched it: it must be safe for concurrent use.
	Progress func(Progress)
}

// Progress is how far a pass has come.
type Progress struct {
	// NamesTotal is the number of distinct names in the pass; NamesDone
	// counts those fetched or failed, NamesFailed those that failed to fetch.
	NamesTotal, NamesDone, NamesFailed int
	// Rows counts rows fetched so far, across all tables.
	Rows int64
}

// NameError is the failure of one nft name in a pass.
type NameError struct {
	NFT string
	Err error
}

func (e NameError) Error() string { return fmt.Sprintf("nft %q: %v", e.NFT, e.Err) }

// Unwrap returns the cause.
func (e NameError) Unwrap() error { return e.Err }

// CutOff reports whether the name failed because its pass ended (its
// deadline, or shutdown) or stopped asking an unavailable upstream (an
// OutageError) before the name was done, rather than for a reason of its
// own.
func (e NameError) CutOff() bool {
	var c *cutOffError
	return errors.As(e.Err, &c)
}

// cutOffError is the failure of a name that the end of its pass, or its
// Breaker, cut off. It says why the pass stopped, the cause its context was
// ended with (see context.WithDeadlineCause), rather than what that did to
// the name's request, which would read as a fault of the name ("no
// complete response within the request timeout").
type cutOffError struct{ cause error }

func (e *cutOffError) Error() string {
	if e.cause == context.Canceled || e.cause == context.DeadlineExceeded {
		// No cause given: say at least that the pass ended, not the name.
		return "pass ended before this name was done: " + e.cause.Error()
	}
	return e.cause.Error()
}

func (e *cutOffError) Unwrap() error { return e.cause }

// Report is the outcome of a pass.
type Report struct {
	// Run is the record written to sync_runs.
	Run sink.Run
	// Failed lists the names that failed, in the order they failed.
	Failed []NameError
	// Rows counts rows written across all tables.
	Rows int
	// Spooled counts rows the sink refused and the spool kept.
	Spooled int
	// RunSpooled is true when the run record went to the spool.
	RunSpooled bool
	// ReadRows and ReadBytes are what the sink's server read for the
	// pass's writes (the refreshes of their derived rows), as it reported
	// them: what the pass cost it.
	ReadRows, ReadBytes uint64
}

// nextVersion returns a version larger than any returned before, from the
// clock in nanoseconds, so two writes of one key within a second still
// order correctly.
func (s *Syncer) nextVersion() uint64 {
	for {
		last := s.version.Load()
		v := uint64(s.cfg.Now().UnixNano())
		if v <= last {
			v = last + 1
		}
		if s.version.CompareAndSwap(last, v) {
			return v
		}
	}
}

// Run executes one pass and records it. Failures of single names are in the
// report, never returned; the error is for a run record that could not be
// written.
func (s *Syncer) Run(ctx context.Context, p Pass) (Report, error) {
	started := s.cfg.Now().UTC()
	snapshotAt := p.SnapshotAt
	if snapshotAt.IsZero() {
		snapshotAt = started
	}
	snapshotAt = snapshotAt.UTC().Truncate(time.Second)
	names := dedupe(p.Names)
	runID := uuid.Must(uuid.NewV7()).String()
	log := s.cfg.Logger.With("run_id", runID, "schedule", p.Schedule, "trigger", p.Trigger)
	log.Info("pass started", "names", len(names), "snapshot_at", snapshotAt)
	ctx, reads := sink.CountReads(ctx)

	st := s.newStore(log)
	w := newWriter(ctx, st, s.cfg.BatchRows, s.cfg.BatchBytes, s.cfg.BatchTimeout, p.Schedule, log)
	w.pass = passInfo{runID: runID, snapshotAt: snapshotAt, shard: p.Shard}
	var flusher gosync.WaitGroup
	flusher.Go(w.run)
	s.fetchAll(ctx, names, snapshotAt, w, p.Progress, log)
	w.close()
	flusher.Wait()

	rep := Report{Failed: w.failed, Rows: w.rows, Spooled: w.spooled, ReadRows: reads.Rows(), ReadBytes: reads.Bytes()}
	rep.Run = sink.Run{
		RunID:      runID,
		Schedule:   p.Schedule,
		Trigger:    p.Trigger,
		SnapshotAt: snapshotAt,
		StartedAt:  started.Truncate(time.Second),
		FinishedAt: s.cfg.Now().UTC().Truncate(time.Second),
		NFTTotal:   uint64(len(names)),
		NFTFailed:  uint64(len(w.failed)),
		NFTOK:      uint64(len(names) - len(w.failed)),
		Messages:   uint64(w.snapshots),
		Shard:      p.Shard,
	}
	rep.Run.Status, rep.Run.Error = status(len(names), w.failed, w.spooled, st.spoolCause)
	logCutOff(ctx, w.failed, snapshotAt, log)
	log.Info("pass finished", "status", rep.Run.Status, "nft_ok", rep.Run.NFTOK, "nft_failed", rep.Run.NFTFailed,
		"rows", rep.Rows, "rows_spooled", rep.Spooled, "read_rows", rep.ReadRows, "read_bytes", rep.ReadBytes,
		"duration_ms", time.Since(started).Milliseconds())

	// The record is stored even when the pass was cancelled: a pass that
	// left no trace is the hardest kind to debug.
	out, err := st.recordRun(ctx, rep.Run)
	rep.RunSpooled = out == spooled
	if err != nil {
		return rep, fmt.Errorf("record run %s: %w", runID, err)
	}
	return rep, nil
}

// newStore is how a pass, or a tick that ran none, writes: the sink, with
// the configured attempts, then the spool.
func (s *Syncer) newStore(log *slog.Logger) *store {
	return &store{sink: s.cfg.Sink, spool: s.cfg.Spool, attempts: s.cfg.WriteAttempts, backoff: s.cfg.WriteBackoff, log: log}
}

// RecordTick stores the record of a tick that ran no pass (StatusSkipped,
// StatusMissed, or StatusFailed when it could not start one) as a pass
// stores its own: in the sink, else in the spool.
func (s *Syncer) RecordTick(ctx context.Context, r sink.Run) error {
	if r.RunID == "" {
		r.RunID = uuid.Must(uuid.NewV7()).String()
	}
	st := s.newStore(s.cfg.Logger)
	if _, err := st.recordRun(ctx, r); err != nil {
		return fmt.Errorf("record %s tick %s of schedule %q: %w", r.Status, r.SnapshotAt.Format(time.RFC3339), r.Schedule, err)
	}
	return nil
}

// fetchAll fetches names with bounded concurrency, handing their rows to
// w as they are decoded. It returns when every name is done. When the
// pass's Breaker trips, the names in flight are cancelled and those not
// yet asked for fail at once, all with the breaker's cause; rows already
// fetched are still written, since w works on ctx.
func (s *Syncer) fetchAll(ctx context.Context, names []string, snapshotAt time.Time, w *writer, progress func(Progress), log *slog.Logger) {
	br := NewBreaker(s.cfg.ObserveBreaker)
	fetchCtx, stopFetching := context.WithCancelCause(ctx)
	defer stopFetching(nil)
	jobs := make(chan string)
	var done, failed atomic.Int64
	var g errgroup.Group
	g.Go(func() error {
		defer close(jobs)
		for _, name := range names {
			jobs <- name
		}
		return nil
	})
	for range s.cfg.Concurrency {
		g.Go(func() error {
			// Each worker reuses one staging buffer for all its names.
			st := &stage{w: w, spill: spillRows(s.cfg.BatchRows), snaps: spillFile{dir: s.cfg.SpillDir}}
			defer st.snaps.close()
			for name := range jobs {
				err := s.fetchName(fetchCtx, name, snapshotAt, st, log.With("nft", name))
				switch {
				case err != nil && fetchCtx.Err() != nil:
					// Run reports the cut-off names in one line, not one each.
					err = &cutOffError{cause: context.Cause(fetchCtx)}
				case br.Record(err):
					stopFetching(br.Cause())
				}
				if err != nil {
					w.fail(name, err)
					failed.Add(1)
				}
				w.recordOutcome(name, err)
				d := done.Add(1)
				if progress != nil {
					progress(Progress{NamesTotal: len(names), NamesDone: int(d), NamesFailed: int(failed.Load()), Rows: w.fetched.Load()})
				}
			}
			return nil
		})
	}
	_ = g.Wait()
}

// spillRows is how many rows of one name are staged in memory. Below it, a
// name's rows are written only once its list has completed; a larger list
// streams through (see stage) instead of filling memory.
// Staging fewer than 64 rows would save nothing worth a file.
func spillRows(batchRows int) int { return min(max(batchRows/8, 64), 4096) }

// fetchName fetches one project and its messages and hands their rows to
// the writer through st.
func (s *Syncer) fetchName(ctx context.Context, nft string, snapshotAt time.Time, st *stage, log *slog.Logger) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	start := s.cfg.Now()
	p, err := s.cfg.Source.ProjectDetails(ctx, nft)
	if err != nil {
		return &stageError{StageDetails, err}
	}
	b := newRowBuilder(s.cfg.Location, snapshotAt, start, s.nextVersion())
	st.begin(nft)
	st.rows.Projects = append(st.rows.Projects, b.project(p))
	restoreWarnings := b.checkpoint()
	messages := 0
	err = s.cfg.Source.ListMessages(ctx, p.ID, func(m apiclient.Message) error {
		messages++
		st.rows.Messages = append(st.rows.Messages, b.message(p.ID, m))
		if snap, ok := b.snapshot(p.ID, m); ok {
			st.rows.Snapshots = append(st.rows.Snapshots, snap)
		}
		return st.maybeSpill()
	}, func() {
		// A retried list comes again from its start. Its rows get a newer
		// version, so they replace any of the failed attempt's project and
		// message rows that were already written; its snapshot rows never
		// left the stage.
		messages = 0
		st.restart()
		b.version = s.nextVersion()
		restoreWarnings()
	})
	if err != nil {
		st.abort()
		return &stageError{StageList, err}
	}
	if p.NFT != nft {
		log.Warn("project nft differs from the name asked for", "project_nft", p.NFT)
	}
	b.logWarnings(log)
	if err := st.commit(); err != nil {
		return err
	}
	log.Debug("name fetched", "project_id", p.ID, "messages", messages,
		"duration_ms", time.Since(start).Milliseconds())
	return nil
}

// logCutOff logs, in one line, that the pass ended before all of its
// names were done, or stopped asking an unavailable upstream: why, when,
// and how many names it cut off. The names themselves are in the report
// and the run record.
func logCutOff(ctx context.Context, failed []NameError, snapshotAt time.Time, log *slog.Logger) {
	n := 0
	var cause *cutOffError
	for _, f := range failed {
		if f.CutOff() {
			n++
			if cause == nil {
				errors.As(f.Err, &cause)
			}
		}
	}
	if n == 0 {
		return
	}
	attrs := []any{"cause", cause.cause.Error(), "snapshot_at", snapshotAt, "names_cut_off", n}
	if errors.As(cause.cause, new(*OutageError)) {
		log.Error("upstream unavailable: the pass stopped asking for names", attrs...)
		return
	}
	if d, ok := ctx.Deadline(); ok {
		attrs = append(attrs, "deadline", d.UTC())
	}
	log.Warn("pass cut off before all names were done", attrs...)
}

// status summarises a pass for sync_runs: its status and, when names
// failed or rows had to be spooled, an error text that says so, naming the
// first few failed names. Names the end of the pass cut off share one
// cause, which is given once.
func status(total int, failed []NameError, spooledRows int, spoolCause error) (string, string) {
	note := ""
	if spooledRows > 0 {
		note = fmt.Sprintf("%d rows spooled after database write failures", spooledRows)
		if fix, refused := sink.Refused(spoolCause); refused {
			note = fmt.Sprintf("%d rows spooled: ClickHouse refused them: %v; to fix: %s", spooledRows, spoolCause, fix)
		}
	}
	if len(failed) == 0 {
		return StatusOK, note
	}
	st := StatusPartial
	if len(failed) == total {
		st = StatusFailed
	}
	own, groups := Grouped(failed)
	const show = 3
	parts := make([]string, 0, show+len(groups)+2)
	for i, f := range own {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(own)-show))
			break
		}
		parts = append(parts, f.Error())
	}
	for _, g := range groups {
		parts = append(parts, "nft "+g.List(show)+": "+g.Cause)
	}
	if note != "" {
		parts = append(parts, note)
	}
	return st, fmt.Sprintf("%d of %d names failed: %s", len(failed), total, strings.Join(parts, "; "))
}

func dedupe(names []string) []string {
	if slices.IsSorted(names) {
		// A resolved list (see Resolver) is sorted, each name once: a
		// copy without its repeats costs no map entry a name.
		return slices.Compact(slices.Clone(names))
	}
	out := make([]string, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
