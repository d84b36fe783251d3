package app

import (
	"context"
	"time"

	"github.com/readsync/readsync/internal/schedule"
	"github.com/readsync/readsync/internal/shard"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// shardIndex is the index whose ticks this process records, -1 when it is
// not sharded: a StatefulSet's pod keeps its ordinal whatever the count.
func (a *app) shardIndex(sh shard.Share) int {
	switch {
	case a.cfg.Member != nil:
		return int(a.cfg.Member.Ordinal)
	case sh == shard.All():
		return -1
	}
	return int(sh.Index)
}

// recordMissedTicks writes, for each schedule, a missed record for every
// tick between the last one a daemon of this shard recorded and now: the
// ticks nobody ran while readsync was not running. On the first start
// there is no last tick, and nothing was missed. When ClickHouse cannot
// say, the missed ticks stay unrecorded, and the log says so.
func (a *app) recordMissedTicks(ctx context.Context, st stores, schedules []sync.Schedule, sh shard.Share) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	lastTicks, err := st.ch.LastTicks(ctx, a.shardIndex(sh))
	if err != nil {
		a.log.Warn("cannot tell which ticks were missed while readsync was not running; they stay unrecorded", "err", err)
		return
	}
	for _, s := range schedules {
		last, ok := lastTicks[s.Name]
		if !ok {
			continue
		}
		ticks, dropped := schedule.MissedTicks(s.Spec, last, now, schedule.MaxMissedTicks)
		if len(ticks) == 0 {
			continue
		}
		runs := make([]sink.Run, len(ticks))
		for i, t := range ticks {
			runs[i] = schedule.TickRecord(s.Name, t, sync.StatusMissed, "readsync was not running at this tick", sh.Label())
		}
		a.log.Warn("ticks missed while readsync was not running", "schedule", s.Name, "missed", len(ticks)+dropped,
			"first", ticks[0], "last", ticks[len(ticks)-1], "not_recorded", dropped)
		if err := st.ch.RecordRuns(ctx, runs); err != nil {
			a.log.Warn("missed ticks not written; they go to the spool", "schedule", s.Name, "err", err)
			for _, r := range runs {
				if err := st.spool.PutRun(r); err != nil {
					a.log.Error("missed tick lost", "schedule", s.Name, "snapshot_at", r.SnapshotAt, "err", err)
				}
			}
		}
	}
}

// skippedTick records a tick the schedule did not run because its
// previous pass still ran.
func (a *app) skippedTick(ctx context.Context, syncer *sync.Syncer, s sync.Schedule, tick time.Time) {
	tick = tick.UTC().Truncate(time.Second)
	a.log.Warn("pass skipped: the previous pass of this schedule is still running", "schedule", s.Name, "snapshot_at", tick)
	r := schedule.TickRecord(s.Name, tick, sync.StatusSkipped, "the previous pass of this schedule was still running", a.shares.Current(ctx).Label())
	if err := syncer.RecordTick(ctx, r); err != nil {
		a.log.Error("skipped tick not recorded", "schedule", s.Name, "err", err)
	}
}
