package schedule

import (
	"time"

	"github.com/robfig/cron/v3"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// MaxMissedTicks bounds the ticks of one schedule that a daemon records as
// missed when it starts: the latest ones, so that a schedule of every
// minute that was down for months does not write months of records at
// once. The log line says how many more were not recorded.
const MaxMissedTicks = 1000

// MissedTicks returns the ticks of spec after last and before now, at most
// max of them (the latest), and how many earlier ones it left out.
func MissedTicks(spec cron.Schedule, last, now time.Time, max int) ([]time.Time, int) {
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

// TickRecord is the run record of a tick that ran no pass: its status
// (sync.StatusSkipped or sync.StatusMissed), why, and the shard label of
// the process that records it.
func TickRecord(schedule string, tick time.Time, status, why, shard string) sink.Run {
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
