package schedule_test

import (
	"bytes"
	"log/slog"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/readsync/readsync/internal/schedule"
	"github.com/readsync/readsync/sync"
)

// A schedule runs one pass at a time: the ticks that find its pass still
// running are skipped, and Stop waits for the running pass.
func TestOnePassOfAScheduleAtATime(t *testing.T) {
	spec, err := sync.CronParser().Parse("@every 1s")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      gosync.Mutex
		passes  []time.Time
		skipped []time.Time
	)
	release := make(chan struct{})
	var log bytes.Buffer
	c := schedule.Start([]sync.Schedule{{Name: "every-second", Spec: spec}}, slog.New(slog.NewTextHandler(&log, nil)),
		func(s sync.Schedule, tick time.Time) {
			mu.Lock()
			passes = append(passes, tick)
			mu.Unlock()
			<-release
		},
		func(s sync.Schedule, tick time.Time) {
			mu.Lock()
			defer mu.Unlock()
			skipped = append(skipped, tick)
		})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(skipped)
		mu.Unlock()
		if n >= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(release)
	c.Stop()
	mu.Lock()
	defer mu.Unlock()
	if len(passes) == 0 || len(skipped) == 0 {
		t.Fatalf("%d passes, %d skipped ticks; want a pass and a tick skipped while it ran", len(passes), len(skipped))
	}
	if !skipped[0].After(passes[0]) {
		t.Errorf("skipped tick %v is not after the running pass's tick %v", skipped[0], passes[0])
	}
	if !strings.Contains(log.String(), "schedule armed") || !strings.Contains(log.String(), "every-second") {
		t.Errorf("no line says the schedule was armed:\n%s", log.String())
	}
}

// The scheduler reports every wake-up at info; readsync logs it at debug.
func TestSchedulerChatterIsDebug(t *testing.T) {
	spec, err := sync.CronParser().Parse("@every 1h")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	c := schedule.Start([]sync.Schedule{{Name: "hourly", Spec: spec}}, slog.New(slog.NewJSONHandler(&b, nil)),
		func(sync.Schedule, time.Time) {}, func(sync.Schedule, time.Time) {})
	c.Stop()
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if strings.Contains(line, `"msg":"cron: `) {
			t.Errorf("scheduler chatter logged at info: %s", line)
		}
	}
}
