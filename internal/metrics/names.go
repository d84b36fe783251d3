package metrics

import (
	gosync "sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sync"
)

// nameMetrics are the metrics of the schedules' names.
type nameMetrics struct {
	failures   *prometheus.CounterVec
	count      *prometheus.GaugeVec
	unresolved *prometheus.GaugeVec
	// failing, notRead and failingPasses are name_health's, read from the
	// database: a restart keeps them.
	failing, notRead, failingPasses *prometheus.GaugeVec

	mu    gosync.Mutex
	since map[string]time.Time // the first failure since the last success, by schedule
	// health are the schedules whose name_health series exist.
	health map[string]bool
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
		failing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "readsync_names_failing",
			Help: "Names of the schedule whose last pass failed to read them, from the view name_health (a backfill's under the schedule \"\").",
		}, []string{"schedule"}),
		notRead: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "readsync_names_not_read",
			Help: "Names of the schedule that have failed READSYNC_NAMES_NOT_READ_PASSES passes in a row or more, from the view name_health.",
		}, []string{"schedule"}),
		failingPasses: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "readsync_names_failing_passes_max",
			Help: "The most passes in a row that a name of the schedule has failed, from the view name_health; 0 when none is failing.",
		}, []string{"schedule"}),
		since:  map[string]time.Time{},
		health: map[string]bool{},
	}
}

func (m *nameMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.failures, m.count, m.unresolved, m.failing, m.notRead, m.failingPasses}
}

// arm gives the schedule its series before the first pass.
func (m *nameMetrics) arm(schedule string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unresolved.WithLabelValues(schedule)
	m.setHealth(schedule, clickhouse.NamesFailing{})
}

// observeHealth sets the failing names' series of each schedule from
// health, by schedule; a schedule it does not name has none failing.
func (m *nameMetrics) observeHealth(health map[string]clickhouse.NamesFailing) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.health {
		m.setHealth(s, health[s])
	}
	for s, h := range health {
		m.setHealth(s, h)
	}
}

// forgetHealth removes the failing names' series, which then say nothing
// rather than what the database said before it stopped answering.
func (m *nameMetrics) forgetHealth() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range []*prometheus.GaugeVec{m.failing, m.notRead, m.failingPasses} {
		g.Reset()
	}
	clear(m.health)
}

// setHealth sets the schedule's name_health series. The caller holds mu.
func (m *nameMetrics) setHealth(schedule string, h clickhouse.NamesFailing) {
	m.health[schedule] = true
	m.failing.WithLabelValues(schedule).Set(float64(h.Failing))
	m.notRead.WithLabelValues(schedule).Set(float64(h.NotRead))
	m.failingPasses.WithLabelValues(schedule).Set(float64(h.MaxPasses))
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
