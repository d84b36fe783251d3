package schedule_test

import (
	"slices"
	"testing"
	"time"

	"github.com/readsync/readsync/internal/schedule"
	"github.com/readsync/readsync/sync"
)

func TestMissedTicks(t *testing.T) {
	hourly, err := sync.CronParser().Parse("0 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	at := func(hhmm string) time.Time {
		v, err := time.Parse("2006-01-02 15:04", "2026-03-01 "+hhmm)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name      string
		last, now string
		max       int
		want      []string
		dropped   int
	}{
		{"down for three ticks", "10:00", "13:30", 10, []string{"11:00", "12:00", "13:00"}, 0},
		{"a tick due now runs now", "10:00", "13:00", 10, []string{"11:00", "12:00"}, 0},
		{"nothing missed", "10:00", "10:59", 10, nil, 0},
		{"the latest kept", "10:00", "15:30", 2, []string{"14:00", "15:00"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, dropped := schedule.MissedTicks(hourly, at(tc.last), at(tc.now), tc.max)
			var hhmm []string
			for _, g := range got {
				hhmm = append(hhmm, g.Format("15:04"))
			}
			if !slices.Equal(hhmm, tc.want) || dropped != tc.dropped {
				t.Errorf("MissedTicks = %v, %d dropped; want %v, %d", hhmm, dropped, tc.want, tc.dropped)
			}
		})
	}
}

// A tick's record says what the tick was and why it ran no pass, in UTC
// to the second.
func TestTickRecord(t *testing.T) {
	tick := time.Date(2026, 3, 1, 11, 0, 0, 500, time.FixedZone("CET", 3600))
	r := schedule.TickRecord("hourly", tick, sync.StatusSkipped, "still running", "1/3")
	if r.Schedule != "hourly" || r.Trigger != sync.TriggerCron || !r.SnapshotAt.Equal(tick.Truncate(time.Second)) ||
		r.SnapshotAt.Location() != time.UTC || r.Status != sync.StatusSkipped || r.Error != "still running" || r.Shard != "1/3" {
		t.Errorf("TickRecord = %+v", r)
	}
}
