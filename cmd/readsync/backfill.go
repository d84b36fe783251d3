package main

import (
	"context"
	"fmt"
	"strings"
	gosync "sync"

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
	sh := everyName
	if len(f.nft) == 0 {
		var err error
		if sh, err = a.shares.check(ctx); err != nil {
			fmt.Fprintf(a.stderr, "readsync: %v\n", err)
			if permanent(err) {
				return exitConfig
			}
			return exitFailed
		}
		a.metrics.observeShare(sh)
	}
	names, scheduleName, err := a.backfillNames(f, sh)
	if err != nil {
		fmt.Fprintf(a.stderr, "readsync: %v\n", err)
		return exitConfig
	}
	passCtx, cancel := withGrace(ctx, a.cfg.ShutdownGrace)
	defer cancel()
	var syncer *sync.Syncer
	var st stores
	if f.dryRun {
		syncer = a.syncer(sink.NewJSONLines(a.stdout), nil)
	} else {
		st, err = a.openStores(ctx)
		if err != nil {
			return a.configFailed(err)
		}
		defer st.Close()
		// Older rows first: a backfill is also how an operator drains the
		// spool by hand.
		a.flushSpool(passCtx, st)
		syncer = a.syncer(st.ch, st.spool)
	}
	prog := newProgress(a.log, a.stderr, len(names))
	var reporter gosync.WaitGroup
	reporter.Go(prog.run)
	rep, err := a.runPass(passCtx, syncer, sync.Pass{
		Names:      names,
		Schedule:   scheduleName,
		Trigger:    sync.TriggerBackfill,
		SnapshotAt: f.snapshotAt,
		Progress:   prog.update,
	})
	prog.close()
	reporter.Wait()
	prog.finish(rep)
	if st.ch != nil {
		a.reconcile(passCtx, st.ch)
	}
	if err != nil {
		a.log.Error("backfill could not be recorded", "err", err)
	}
	switch {
	case rep.Spooled > 0, rep.RunSpooled && len(rep.Failed) == 0:
		a.spoolWaits(st)
		return exitSpooled
	case err != nil || len(rep.Failed) > 0:
		return exitFailed
	}
	return exitOK
}

// backfillNames picks the pass's names from the flags: --nft exactly,
// --schedule one schedule's, otherwise every schedule's once. Names from
// schedules are limited to the share sh (READSYNC_SHARD's, read once for
// the pass); --nft names are taken as given, since naming them is an
// explicit request.
func (a *app) backfillNames(f flags, sh share) ([]string, string, error) {
	switch {
	case len(f.nft) > 0:
		return f.nft, "", nil
	case f.schedule != "":
		for _, s := range a.cfg.Schedules {
			if s.Name == f.schedule {
				return sh.filter(s.NFTNames), s.Name, nil
			}
		}
		known := make([]string, len(a.cfg.Schedules))
		for i, s := range a.cfg.Schedules {
			known[i] = fmt.Sprintf("%q", s.Name)
		}
		return nil, "", fmt.Errorf("--schedule %q: no such schedule in %s (have %s)",
			f.schedule, a.cfg.SchedulesFile, strings.Join(known, ", "))
	default:
		return sh.filter(sync.Names(a.cfg.Schedules)), "", nil
	}
}
