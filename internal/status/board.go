package status

import (
	"context"
	"log/slog"
	gosync "sync"
	"time"

	"github.com/readsync/readsync/internal/loop"
	"github.com/readsync/readsync/sink/derived"
)

// Stored is what a Board reads from ClickHouse.
type Stored struct {
	ServerVersion     string
	Migration, Latest uint32
	Pending           []string
	// LastPasses is the last pass of each schedule by this process's
	// share (see Schedule.LastPass).
	LastPasses map[string]Pass
	// Counts is, by schedule, how many names fail; a schedule it does
	// not name has none failing.
	Counts map[string]Counts
	// Failing is the first MaxFailing failing names.
	Failing []Name
	Expiry  ExpiryRuns
}

// Counts is how many names of a schedule fail (see Schedule).
type Counts struct{ Failing, NotRead uint64 }

// ExpiryRuns is what the record of expiry says of its recent runs (see
// Expiry).
type ExpiryRuns struct {
	LastRun, LastDrop time.Time
	Owner             string
	Dropped           uint64
}

// Local is what the process knows itself, read at every request.
type Local struct {
	// Shard is the share of the names the last pass took ("i/n", or
	// "all"), and ShardLabel as sync_runs records it.
	Shard, ShardLabel string
	// Spool is its size now; Oldest is left to the Board.
	Spool Spool
}

// ScheduleConfig is a schedule as configured.
type ScheduleConfig struct {
	Name, Cron string
	// Next returns its first tick after t.
	Next func(t time.Time) time.Time
}

// Config is what a Board shows and where it reads it from.
type Config struct {
	Version, Database string
	Schedules         []ScheduleConfig
	Retentions        []Retention
	// Interval is the time between two reads of ClickHouse.
	Interval time.Duration
	// PassLookBack is how far back sync_runs is read for the last
	// passes, ExpiryLookBack the record of expiry for its last run.
	PassLookBack, ExpiryLookBack time.Duration
	// Local reads what the process knows itself.
	Local func() Local
	// Read reads ClickHouse for the share of the names shardLabel
	// records (see Local).
	Read func(ctx context.Context, shardLabel string) (Stored, error)
	// SpoolOldest returns when the spool's oldest entry was written, and
	// false when it holds none; read with ClickHouse, as it lists the
	// spool's directory.
	SpoolOldest func() (time.Time, bool, error)
	Log         *slog.Logger
}

// Board holds the page's content: what it read last from ClickHouse,
// and the reconcile's last step. Its methods may be called from any
// goroutine; Refresh is the step of the loop that keeps it current.
type Board struct {
	cfg Config

	mu     gosync.Mutex
	stored Stored
	readAt time.Time // when stored was read; zero before the first read
	err    string    // why the last read failed; empty when it succeeded
	reads  uint64
	oldest *time.Time
	recon  Reconcile
}

// NewBoard returns a Board that has read nothing yet.
func NewBoard(cfg Config) *Board {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Board{cfg: cfg}
}

// refreshTimeout bounds one read of ClickHouse, which shutdown waits for.
const refreshTimeout = 30 * time.Second

// Loop returns the loop that refreshes the Board every Interval, from
// the start: with ClickHouse down the page says so from the first
// refresh. Its owner runs it with Refresh as its step.
func (b *Board) Loop() *loop.Runner {
	// A read in flight at shutdown is let finish: cut off, it would drop
	// its connection in the middle of a statement.
	return loop.New(loop.Config{Timeout: refreshTimeout, Grace: refreshTimeout})
}

// Refresh reads ClickHouse and the spool's oldest entry once. A failed
// read keeps what was read before, and says why; the loop waits Interval
// in either case, so that the page never reads more often.
func (b *Board) Refresh(ctx context.Context) (loop.Next, error) {
	var oldest *time.Time
	if at, ok, err := b.cfg.SpoolOldest(); err != nil {
		b.cfg.Log.Warn("status page: reading the spool's oldest entry failed", "err", err)
	} else if ok {
		oldest = &at
	}
	local := b.cfg.Local()
	stored, err := b.cfg.Read(ctx, local.ShardLabel)
	if ctx.Err() != nil && err != nil {
		return loop.Next{}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	b.oldest = oldest
	if err != nil {
		b.err = err.Error()
		b.cfg.Log.Warn("status page: reading ClickHouse failed; the page shows what it read before", "err", err, "retry_in", b.cfg.Interval.String())
		return loop.Next{Wait: b.cfg.Interval}, nil
	}
	b.stored, b.readAt, b.err = stored, time.Now(), ""
	return loop.Next{Wait: b.cfg.Interval}, nil
}

// ObserveReconcile records a step of the daemon's reconcile loop; its
// signature is derived.LoopConfig's Observe.
func (b *Board) ObserveReconcile(rep derived.StepReport, _ time.Duration, err error) {
	now := time.Now().UTC()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recon.LastStepAt = &now
	if err != nil {
		b.recon.Error = err.Error()
		return
	}
	b.recon.Error, b.recon.HeldBy = "", rep.HeldBy
	if rep.HeldBy != "" {
		return
	}
	b.recon.SnapshotChangesTo = unixTime(rep.To.Snapshots.ChangedAt)
	b.recon.TickChangesTo = unixTime(rep.To.Ticks.ChangedAt)
	if !rep.Reached.IsZero() {
		at := rep.Reached.UTC()
		b.recon.ReachedAt = &at
	}
	b.recon.Pending = rep.Pending
}

// Status composes the page's content as of now.
func (b *Board) Status(now time.Time) Status {
	now = now.UTC()
	local := b.cfg.Local()
	b.mu.Lock()
	defer b.mu.Unlock()
	st := Status{
		Version:     b.cfg.Version,
		GeneratedAt: now,
		ClickHouse:  b.clickHouse(now),
		Failing:     Failing{Names: b.stored.Failing},
		Spool:       local.Spool,
		Reconcile:   b.recon,
		Expiry:      b.expiry(),
		Schedules:   []Schedule{},
	}
	if st.Failing.Names == nil {
		st.Failing.Names = []Name{}
	}
	for _, c := range b.stored.Counts {
		st.Failing.Total += c.Failing
	}
	if st.Spool.Entries > 0 {
		st.Spool.Oldest = b.oldest
	}
	if at := st.Reconcile.ReachedAt; at != nil {
		lag := max(now.Sub(*at), 0).Seconds()
		st.Reconcile.LagSeconds = &lag
	}
	for _, s := range b.cfg.Schedules {
		sc := Schedule{Name: s.Name, Cron: s.Cron, Shard: local.Shard, NextPass: s.Next(now).UTC(),
			LookBackSeconds: b.cfg.PassLookBack.Seconds(),
			NamesFailing:    b.stored.Counts[s.Name].Failing, NamesNotRead: b.stored.Counts[s.Name].NotRead}
		if p, ok := b.stored.LastPasses[s.Name]; ok {
			sc.LastPass = &p
		}
		st.Schedules = append(st.Schedules, sc)
	}
	return st
}

// clickHouse is what the page says of ClickHouse.
func (b *Board) clickHouse(now time.Time) ClickHouse {
	c := ClickHouse{Answering: b.err == "" && !b.readAt.IsZero(), Error: b.err, Reads: b.reads, Database: b.cfg.Database,
		ServerVersion: b.stored.ServerVersion, Migration: b.stored.Migration, Latest: b.stored.Latest, Pending: b.stored.Pending}
	if c.Pending == nil {
		c.Pending = []string{}
	}
	if !b.readAt.IsZero() {
		at := b.readAt.UTC()
		age := max(now.Sub(at), 0).Seconds()
		c.ReadAt, c.AgeSeconds = &at, &age
	} else if b.err == "" {
		c.Error = "not read yet"
	}
	return c
}

// expiry is what the page says of expiry.
func (b *Board) expiry() Expiry {
	e := Expiry{Retentions: b.cfg.Retentions, Owner: b.stored.Expiry.Owner, Dropped: b.stored.Expiry.Dropped,
		LookBackSeconds: b.cfg.ExpiryLookBack.Seconds()}
	if t := b.stored.Expiry.LastRun; !t.IsZero() {
		e.LastRun = &t
	}
	if t := b.stored.Expiry.LastDrop; !t.IsZero() {
		e.LastDrop = &t
	}
	return e
}

// unixTime is the time of a change log's key, nil for its zero position.
func unixTime(s uint32) *time.Time {
	if s == 0 {
		return nil
	}
	t := time.Unix(int64(s), 0).UTC()
	return &t
}
