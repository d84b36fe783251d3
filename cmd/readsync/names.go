package main

import (
	"context"
	"strings"
	gosync "sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	a.metrics.names.observe(s.Name, res)
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

// nameMetrics are the metrics of the schedules' names.
type nameMetrics struct {
	failures   *prometheus.CounterVec
	count      *prometheus.GaugeVec
	unresolved *prometheus.GaugeVec

	mu    gosync.Mutex
	since map[string]time.Time // the first failure since the last success, by schedule
}

func newNameMetrics() *nameMetrics {
	return &nameMetrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "readsync_names_resolve_failures_total",
			Help: "Passes at which a source of a schedule's names (nft_names_file, nft_names_query) failed, by schedule and source; the pass ran on the schedule's last list.",
		}, []string{"schedule", "source"}),
		count: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "readsync_schedule_names",
			Help: "Names of the schedule at its last pass, every source together, before they are shared between pods.",
		}, []string{"schedule"}),
		unresolved: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "readsync_names_unresolved_since_timestamp_seconds",
			Help: "Unix time of the first pass whose names a source failed to resolve since the schedule's names last resolved; 0 while they resolve.",
		}, []string{"schedule"}),
		since: map[string]time.Time{},
	}
}

func (m *nameMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.failures, m.count, m.unresolved}
}

// arm gives the schedule its series before the first pass.
func (m *nameMetrics) arm(schedule string) {
	m.unresolved.WithLabelValues(schedule)
}

// observe records a resolution of the schedule's names.
func (m *nameMetrics) observe(schedule string, res sync.Resolution) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if res.Err == nil {
		delete(m.since, schedule)
		m.unresolved.WithLabelValues(schedule).Set(0)
	} else {
		for _, src := range sync.FailedSources(res.Err) {
			m.failures.WithLabelValues(schedule, src).Inc()
		}
		if _, failing := m.since[schedule]; !failing {
			m.since[schedule] = time.Now()
		}
		m.unresolved.WithLabelValues(schedule).Set(float64(m.since[schedule].Unix()))
	}
	m.count.WithLabelValues(schedule).Set(float64(len(res.Names)))
}
