package app

import (
	"context"
	"strings"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// passNames resolves the schedule's names for the pass of tick (see
// sync.Resolver) and says how it went: a source that resolved to no names
// is legal but said; one that failed leaves the pass the schedule's last
// list, with a warning; with no list ever resolved, the tick is recorded
// failed with the reason, and ok is false.
func (a *app) passNames(ctx context.Context, syncer *sync.Syncer, r *sync.Resolver, s sync.Schedule, tick time.Time) (names []string, ok bool) {
	res := r.Resolve(ctx, s)
	a.metrics.ObserveNames(s.Name, res)
	for _, c := range res.Counts {
		if c.Names == 0 && s.Dynamic() {
			a.log.Warn("a source of a schedule's names resolved to no names", "schedule", s.Name, "source", c.Source)
		}
	}
	if res.Err == nil {
		return res.Names, true
	}
	sources := strings.Join(sync.FailedSources(res.Err), ",")
	if res.Stale {
		a.log.Warn("names of a schedule not resolved; the pass runs on its last list", "schedule", s.Name, "source", sources,
			"names", len(res.Names), "err", res.Err)
		return res.Names, true
	}
	a.log.Error("names of a schedule not resolved, and no list ever was; the tick is recorded failed", "schedule", s.Name,
		"source", sources, "err", res.Err)
	now := time.Now().UTC().Truncate(time.Second)
	err := syncer.RecordTick(ctx, sink.Run{Schedule: s.Name, Trigger: sync.TriggerCron, SnapshotAt: tick, StartedAt: now, FinishedAt: now,
		Status: sync.StatusFailed, Error: "names not resolved: " + res.Err.Error()})
	if err != nil {
		a.log.Error("tick could not be recorded", "schedule", s.Name, "err", err)
	}
	return nil, false
}
