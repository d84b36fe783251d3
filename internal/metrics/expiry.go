package metrics

import (
	gosync "sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readsync/readsync/sink/expiry"
	"github.com/readsync/readsync/sink/schema"
)

// expiryMetrics are the metrics of the history's size and its expiry.
type expiryMetrics struct {
	retention, oldest *prometheus.GaugeVec
	rows, bytes       *prometheus.GaugeVec
	runs              *prometheus.CounterVec
	dropped           *prometheus.GaugeVec
	lastRun           prometheus.Gauge

	mu gosync.Mutex
}

func newExpiryMetrics() *expiryMetrics {
	return &expiryMetrics{
		retention: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "readsync_retention_seconds",
			Help: "The retention of the resolution (READSYNC_RETAIN_RAW, READSYNC_RETAIN_HOURLY, READSYNC_RETAIN_DAILY) in seconds; 0 keeps it forever.",
		}, []string{"resolution"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "readsync_history_oldest_timestamp_seconds",
			Help: "Unix time of the oldest row kept of the resolution, over its tables, from system.parts; absent while it holds none or ClickHouse does not answer.",
		}, []string{"resolution"}),
		rows: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "readsync_table_rows",
			Help: "Rows of each table that expires, on every host (replicas included), from system.parts.",
		}, []string{"table"}),
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "readsync_table_bytes",
			Help: "Bytes on disk of each table that expires, on every host (replicas included), from system.parts.",
		}, []string{"table"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "readsync_expiry_runs_total",
			Help: "Runs of the daemon's expiry, by outcome: ok, error, held (another daemon runs it), waiting (the move of the snapshot table is under way).",
		}, []string{"outcome"}),
		dropped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "readsync_expiry_last_dropped",
			Help: "What this process's last expiry run dropped: partitions, rows and bytes (what).",
		}, []string{"what"}),
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "readsync_expiry_last_run_timestamp_seconds",
			Help: "Unix time of this process's last expiry run that completed; 0 before the first.",
		}),
	}
}

func (m *expiryMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.retention, m.oldest, m.rows, m.bytes, m.runs, m.dropped, m.lastRun}
}

// arm gives the series their values before the first run.
func (m *expiryMetrics) arm(p expiry.Policy) {
	for _, r := range schema.Resolutions() {
		m.retention.WithLabelValues(string(r)).Set(p[r].Seconds())
	}
	for _, o := range []string{"ok", "error", "held", "waiting"} {
		m.runs.WithLabelValues(o)
	}
	for _, w := range []string{"partitions", "rows", "bytes"} {
		m.dropped.WithLabelValues(w)
	}
}

// observeStored sets the history's size from its partitions.
func (m *expiryMetrics) observeStored(parts []expiry.Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.oldest.Reset()
	m.rows.Reset()
	m.bytes.Reset()
	oldest := map[schema.Resolution]time.Time{}
	for _, t := range schema.ExpiringTables() {
		m.rows.WithLabelValues(t.Name)
		m.bytes.WithLabelValues(t.Name)
	}
	for _, p := range parts {
		m.rows.WithLabelValues(p.Table).Add(float64(p.Rows))
		m.bytes.WithLabelValues(p.Table).Add(float64(p.Bytes))
		if o, ok := oldest[p.Resolution]; !ok || p.Oldest.Before(o) {
			oldest[p.Resolution] = p.Oldest
		}
	}
	for r, o := range oldest {
		m.oldest.WithLabelValues(string(r)).Set(float64(o.Unix()))
	}
}

// forgetStored removes the size's series while ClickHouse does not
// answer: absent, they say nothing rather than something stale.
func (m *expiryMetrics) forgetStored() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.oldest.Reset()
	m.rows.Reset()
	m.bytes.Reset()
}

// observeRun counts a run by outcome and, for one that completed, what
// it dropped.
func (m *expiryMetrics) observeRun(outcome string, rep expiry.Report) {
	m.runs.WithLabelValues(outcome).Inc()
	if outcome != "ok" {
		return
	}
	rows, bytes := rep.Rows()
	m.dropped.WithLabelValues("partitions").Set(float64(len(rep.Dropped)))
	m.dropped.WithLabelValues("rows").Set(float64(rows))
	m.dropped.WithLabelValues("bytes").Set(float64(bytes))
	m.lastRun.SetToCurrentTime()
}

// ArmExpiry sets the retentions' series and gives the expiry's theirs
// before the first run.
func (m *Metrics) ArmExpiry(p expiry.Policy) { m.expiry.arm(p) }

// ObserveStored sets the size of the history from its partitions, nil
// when system.parts could not be read.
func (m *Metrics) ObserveStored(parts []expiry.Partition, err error) {
	if err != nil {
		m.expiry.forgetStored()
		return
	}
	m.expiry.observeStored(parts)
}

// ObserveExpiry counts an expiry run: outcome is ok, error, held or
// waiting.
func (m *Metrics) ObserveExpiry(outcome string, rep expiry.Report) { m.expiry.observeRun(outcome, rep) }
