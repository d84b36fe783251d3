package main

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// maxMissedTicks bounds the ticks of one schedule that a daemon records as
// missed when it starts: the latest ones, so that a schedule of every
// minute that was down for months does not write months of records at
// once. The log line says how many more were not recorded.
const maxMissedTicks = 1000

// missedTicks returns the ticks of spec after last and before now, at most
// max of them (the latest), and how many earlier ones it left out.
func missedTicks(spec cron.Schedule, last, now time.Time, max int) ([]time.Time, int) {
	var ticks []time.Time
	dropped := 0
	for t := spec.Next(last); !t.IsZero() && t.Before(now); t = spec.Next(t) {
		if len(ticks) == max {
			ticks = ticks[1:]
			dropped++
		}
		ticks = append(ticks, t)
	}
	return ticks, dropped
}

// shardLabel is how sync_runs.shard records a share: "i/n", or empty for
// a process that takes every name.
func shardLabel(sh share) string {
	if sh == everyName {
		return ""
	}
	return fmt.Sprintf("%d/%d", sh.Index, sh.Count)
}

// shardIndex is the index whose ticks this process records, -1 when it is
// not sharded: a StatefulSet's pod keeps its ordinal whatever the count.
func (a *app) shardIndex(sh share) int {
	switch {
	case a.cfg.Member != nil:
		return int(a.cfg.Member.Ordinal)
	case sh == everyName:
		return -1
	}
	return int(sh.Index)
}

// recordMissedTicks writes, for each schedule, a missed record for every
// tick between the last one a daemon of this shard recorded and now: the
// ticks nobody ran while readsync was not running. On the first start
// there is no last tick, and nothing was missed. When ClickHouse cannot
// say, the missed ticks stay unrecorded, and the log says so.
func (a *app) recordMissedTicks(ctx context.Context, st stores, schedules []sync.Schedule, sh share) {
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
		ticks, dropped := missedTicks(s.Spec, last, now, maxMissedTicks)
		if len(ticks) == 0 {
			continue
		}
		runs := make([]sink.Run, len(ticks))
		for i, t := range ticks {
			runs[i] = tickRecord(s.Name, t, sync.StatusMissed, "readsync was not running at this tick", shardLabel(sh))
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
	r := tickRecord(s.Name, tick, sync.StatusSkipped, "the previous pass of this schedule was still running", shardLabel(a.shares.current(ctx)))
	if err := syncer.RecordTick(ctx, r); err != nil {
		a.log.Error("skipped tick not recorded", "schedule", s.Name, "err", err)
	}
}

// tickRecord is the run record of a tick that ran no pass.
func tickRecord(schedule string, tick time.Time, status, why, shard string) sink.Run {
	now := time.Now().UTC().Truncate(time.Second)
	return sink.Run{
		Schedule:   schedule,
		Trigger:    sync.TriggerCron,
		SnapshotAt: tick.UTC().Truncate(time.Second),
		StartedAt:  now,
		FinishedAt: now,
		Status:     status,
		Error:      why,
		Shard:      shard,
	}
}
