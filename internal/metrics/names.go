package metrics

import (
	gosync "sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readsync/readsync/sync"
)

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
