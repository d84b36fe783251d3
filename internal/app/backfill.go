package app

import (
	"context"
	"fmt"
	"strings"
	gosync "sync"

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
	sh := shard.All()
	if len(f.nft) == 0 {
		var err error
		if sh, err = a.shares.Check(ctx); err != nil {
			fmt.Fprintf(a.stderr, "readsync: %v\n", err)
			if kubeapi.Permanent(err) {
				return exitConfig
			}
			return exitFailed
		}
		a.metrics.ObserveShare(sh)
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
		return exitSpooled
	case err != nil || len(rep.Failed) > 0:
		return exitFailed
	}
	return exitOK
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

// backfillNames picks the pass's names from the flags: --nft exactly,
// --schedule one schedule's, otherwise every schedule's once. Names from
// schedules are limited to the share sh (READSYNC_SHARD's, read once for
// the pass); --nft names are taken as given, since naming them is an
// explicit request.
func (a *app) backfillNames(f flags, sh shard.Share) ([]string, string, error) {
	switch {
	case len(f.nft) > 0:
		return f.nft, "", nil
	case f.schedule != "":
		for _, s := range a.cfg.Schedules {
			if s.Name == f.schedule {
				return sh.Filter(s.NFTNames), s.Name, nil
			}
		}
		known := make([]string, len(a.cfg.Schedules))
		for i, s := range a.cfg.Schedules {
			known[i] = fmt.Sprintf("%q", s.Name)
		}
		return nil, "", fmt.Errorf("--schedule %q: no such schedule in %s (have %s)",
			f.schedule, a.cfg.SchedulesFile, strings.Join(known, ", "))
	default:
		return sh.Filter(sync.Names(a.cfg.Schedules)), "", nil
	}
}
