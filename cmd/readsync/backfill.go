package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// backfill runs one pass now over the chosen names and exits 0 when every
// name synced, 1 otherwise.
func (a *app) backfill(ctx context.Context, f flags) int {
	names, scheduleName, err := a.backfillNames(f)
	if err != nil {
		fmt.Fprintf(a.stderr, "readsync: %v\n", err)
		return exitConfig
	}
	var out sync.Sink
	if f.dryRun {
		out = sink.NewJSONLines(a.stdout)
	} else {
		ch, err := a.openClickHouse(ctx)
		if err != nil {
			a.log.Error("ClickHouse unavailable", "err", err)
			return exitFailed
		}
		defer ch.Close()
		out = ch
	}
	rep, err := a.syncer(out).Run(ctx, sync.Pass{
		Names:      names,
		Schedule:   scheduleName,
		Trigger:    sync.TriggerBackfill,
		SnapshotAt: f.snapshotAt,
	})
	if err != nil {
		a.log.Error("backfill could not be recorded", "err", err)
		return exitFailed
	}
	if len(rep.Failed) > 0 {
		return exitFailed
	}
	return exitOK
}

// backfillNames picks the pass's names from the flags: --nft exactly,
// --schedule one schedule's, otherwise every schedule's once.
func (a *app) backfillNames(f flags) ([]string, string, error) {
	switch {
	case len(f.nft) > 0:
		return f.nft, "", nil
	case f.schedule != "":
		for _, s := range a.cfg.Schedules {
			if s.Name == f.schedule {
				return s.NFTNames, s.Name, nil
			}
		}
		known := make([]string, len(a.cfg.Schedules))
		for i, s := range a.cfg.Schedules {
			known[i] = fmt.Sprintf("%q", s.Name)
		}
		return nil, "", fmt.Errorf("--schedule %q: no such schedule in %s (have %s)",
			f.schedule, a.cfg.SchedulesFile, strings.Join(known, ", "))
	default:
		return sync.Names(a.cfg.Schedules), "", nil
	}
}
