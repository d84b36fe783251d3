package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	gosync "sync"
	"time"

	"github.com/readsync/readsync/internal/kubeapi"
	"github.com/readsync/readsync/internal/progress"
	"github.com/readsync/readsync/internal/shard"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// backfill runs one pass now over the chosen names. It exits 0 when every
// name synced, 3 when rows were fetched but some of them (or the run
// record) wait in the spool, saying where and how to deliver them, and 1
// when names failed.
//
// A signal lets the pass go on for the shutdown grace and then cancels it;
// what was fetched is spooled, and the exit code tells what was not done.
func (a *app) backfill(ctx context.Context, f flags) int {
	sh, code := a.backfillShare(ctx, f)
	if code != ExitOK {
		return code
	}
	if err := a.knownSchedule(f.schedule); err != nil {
		fmt.Fprintf(a.stderr, "readsync: %v\n", err)
		return ExitConfig
	}
	if err := a.withinRetention(f.snapshotAt, time.Now()); err != nil {
		fmt.Fprintf(a.stderr, "readsync: %v\n", err)
		return ExitConfig
	}
	passCtx, cancel := withGrace(ctx, a.cfg.ShutdownGrace)
	defer cancel()
	var syncer *sync.Syncer
	var st stores
	var queries sync.NameQuerier // none in a dry run, which has no ClickHouse
	if f.dryRun {
		syncer = a.syncer(sink.NewJSONLines(a.stdout), nil)
	} else {
		var err error
		st, err = a.openUnmigrated(ctx)
		if err != nil {
			return a.configFailed(err)
		}
		defer st.Close()
		if st.spool.Stats().Entries > 0 {
			// Older rows first: a backfill is also how an operator drains
			// the spool by hand.
			a.migrateNow(ctx, st.ch)
			a.flushSpool(passCtx, st)
		} else {
			// The pass fetches while the schema of a new database is
			// created, or an upgrade's migrations run; its first write
			// waits for them. Waited for before ClickHouse closes.
			var migrations gosync.WaitGroup
			defer migrations.Wait()
			migrations.Go(func() { a.migrateNow(ctx, st.ch) })
		}
		syncer = a.syncer(st.ch, st.spool)
		queries = st.ch
	}
	names, scheduleName, unresolved := a.backfillNames(ctx, f, sh, queries)
	rep, err := a.backfillPass(passCtx, syncer, sync.Pass{
		Names:      names,
		Schedule:   scheduleName,
		Trigger:    sync.TriggerBackfill,
		SnapshotAt: f.snapshotAt,
	})
	if st.ch != nil {
		a.reconcile(passCtx, st.ch)
	}
	if err != nil {
		a.log.Error("backfill could not be recorded", "err", err)
	}
	switch {
	case rep.Spooled > 0, rep.RunSpooled && len(rep.Failed) == 0:
		a.spoolWaits(st)
		return ExitSpooled
	case err != nil || len(rep.Failed) > 0 || unresolved:
		return ExitFailed
	}
	return ExitOK
}

// backfillShare is the share of the names a backfill takes: all of them
// for names given with --nft, else this process's shard, read as the
// daemon reads it before a pass. A code other than ExitOK is the exit of
// a share that could not be read.
func (a *app) backfillShare(ctx context.Context, f flags) (shard.Share, int) {
	if len(f.nft) > 0 {
		return shard.All(), ExitOK
	}
	sh, err := a.shares.Check(ctx)
	if err != nil {
		fmt.Fprintf(a.stderr, "readsync: %v\n", err)
		if kubeapi.Permanent(err) {
			return sh, ExitConfig
		}
		return sh, ExitFailed
	}
	a.metrics.ObserveShare(sh)
	return sh, ExitOK
}

// backfillPass runs the backfill's pass p with its progress shown, and
// the summary once the pass has returned.
func (a *app) backfillPass(ctx context.Context, syncer *sync.Syncer, p sync.Pass) (sync.Report, error) {
	prog := progress.New(a.log, a.stderr, isTerminal(a.stderr), len(p.Names))
	var reporter gosync.WaitGroup
	reporter.Go(prog.Run)
	p.Progress = prog.Update
	rep, err := a.runPass(ctx, syncer, p)
	prog.Close()
	reporter.Wait()
	prog.Finish(rep)
	return rep, err
}

// knownSchedule checks --schedule's name.
func (a *app) knownSchedule(name string) error {
	if name == "" || a.cfg.Schedules == nil {
		// nil: a mode that reads only ClickHouse, without a schedules
		// file named (config.Needs); the name filters what it reads.
		return nil
	}
	known := make([]string, len(a.cfg.Schedules))
	for i, s := range a.cfg.Schedules {
		if s.Name == name {
			return nil
		}
		known[i] = fmt.Sprintf("%q", s.Name)
	}
	return fmt.Errorf("--schedule %q: no such schedule in %s (have %s)", name, a.cfg.SchedulesFile, strings.Join(known, ", "))
}

// backfillNames picks the pass's names from the flags: --nft exactly,
// --schedule one schedule's, otherwise every schedule's once, each read
// from its sources now (queries on q, nil in a dry run). Names from
// schedules are limited to the share sh (READSYNC_SHARD's, read once for
// the pass); --nft names are taken as given, since naming them is an
// explicit request. A source that fails is logged, and unresolved says
// so; the pass takes the names of the others.
func (a *app) backfillNames(ctx context.Context, f flags, sh shard.Share, q sync.NameQuerier) (names []string, schedule string, unresolved bool) {
	if len(f.nft) > 0 {
		return f.nft, "", false
	}
	var chosen []sync.Schedule
	dynamic := false
	for _, s := range a.cfg.Schedules {
		if f.schedule == "" || s.Name == f.schedule {
			chosen = append(chosen, s)
			dynamic = dynamic || s.Dynamic()
		}
	}
	if !dynamic {
		// Inline lists only: every name once, in the order first listed.
		return sh.Filter(sync.Names(chosen)), f.schedule, false
	}
	for _, s := range chosen {
		got, _, err := sync.ResolveNames(ctx, s, q)
		if err != nil {
			a.log.Error("names of a schedule not resolved; the backfill goes on without them", "schedule", s.Name,
				"source", strings.Join(sync.FailedSources(err), ","), "err", err)
			unresolved = true
		}
		names = append(names, sh.Filter(got)...)
	}
	if len(chosen) > 1 {
		slices.Sort(names)
		names = slices.Compact(names)
	}
	return names, f.schedule, unresolved
}
