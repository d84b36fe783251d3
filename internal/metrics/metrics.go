// Package metrics holds readsync's Prometheus series: one registry per
// process, created by New and served by the daemon's /metrics, and the
// hooks the API client, the passes, the ClickHouse sink, the spool and the
// reconcile report through.
package metrics

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/readsync/readsync/internal/shard"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/spool"
	"github.com/readsync/readsync/sync"
)

// Metrics are the process's Prometheus series. Every name starts with
// readsync_; labels carry only bounded values (schedule names from the
// configuration, operations, outcomes, tables), never nft names. Its
// methods may be called from any goroutine.
type Metrics struct {
	reg *prometheus.Registry
	// all holds every collector registered in reg, so that the reference
	// of metrics can be held to what is registered (a vector's series
	// appear in reg only once they have a value).
	all []prometheus.Collector

	passes       *prometheus.CounterVec
	passDuration *prometheus.HistogramVec
	lastSuccess  *prometheus.GaugeVec
	namesFailed  *prometheus.CounterVec
	apiRequests  *prometheus.CounterVec
	apiDuration  *prometheus.HistogramVec
	rowsWritten  *prometheus.CounterVec
	inserts      *prometheus.CounterVec
	rowsSpooled  prometheus.Counter
	breakerOpen  prometheus.Gauge
	breakerTrips prometheus.Counter

	// delivery is how writes to ClickHouse fare, fed by ObserveInsert and
	// by the process's migrations.
	delivery delivery

	shardIndex prometheus.Gauge
	// shards is the count of readsync_shards, exported under its
	// deprecated name too (see New).
	shards            atomic.Uint32
	share             atomic.Pointer[shard.Share]
	shardReadFailures prometheus.Counter

	reconciles         *prometheus.CounterVec
	reconcileRewritten prometheus.Counter
	reconcileReached   prometheus.Gauge
	reconcilePending   prometheus.Gauge

	// readRows and readBytes are what ClickHouse read for the work of
	// each kind (pass, reconcile).
	readRows, readBytes *prometheus.CounterVec

	names  *nameMetrics
	expiry *expiryMetrics
}

// New registers every series of a process running the build of version
// and commit in a registry of its own (see Registry).
func New(version, commit string) *Metrics {
	m := newSeries()
	m.register(m.passes, m.passDuration, m.lastSuccess, m.namesFailed, m.apiRequests, m.apiDuration,
		m.rowsWritten, m.inserts, m.rowsSpooled, m.breakerOpen, m.breakerTrips, m.shardIndex, m.shardReadFailures,
		m.reconciles, m.reconcileRewritten, m.reconcileReached, m.reconcilePending, m.readRows, m.readBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.register(m.names.collectors()...)
	m.register(m.expiry.collectors()...)
	m.registerReadOnScrape(version, commit)
	for _, outcome := range []string{"ok", "error", "deferred"} {
		m.reconciles.WithLabelValues(outcome)
	}
	for _, work := range []string{workPass, workReconcile} {
		m.readRows.WithLabelValues(work)
		m.readBytes.WithLabelValues(work)
	}
	return m
}

// newSeries declares the series the process updates as it goes.
func newSeries() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), names: newNameMetrics(), expiry: newExpiryMetrics()}
	m.declarePassSeries()
	m.declareWriteSeries()
	m.declareShardSeries()
	m.declareReconcileSeries()
	m.declareReadSeries()
	return m
}

// The kinds of work whose reads readsync_clickhouse_read_*_total count.
const (
	workPass      = "pass"
	workReconcile = "reconcile"
)

// declareReadSeries declares the series of what ClickHouse read for
// readsync's work: the cost that grows with the history stored when a read
// does not follow a table's sort key.
func (m *Metrics) declareReadSeries() {
	m.readRows = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "readsync_clickhouse_read_rows_total",
		Help: "Rows ClickHouse read (whole granules) for readsync's work, by work: pass (the refreshes of what passes wrote) or reconcile (its steps).",
	}, []string{"work"})
	m.readBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "readsync_clickhouse_read_bytes_total",
		Help: "Uncompressed bytes ClickHouse read for readsync's work, by work: pass or reconcile.",
	}, []string{"work"})
}

func (m *Metrics) observeReads(work string, rows, bytes uint64) {
	m.readRows.WithLabelValues(work).Add(float64(rows))
	m.readBytes.WithLabelValues(work).Add(float64(bytes))
}

// declarePassSeries declares the series of passes and of the upstream they ask.
func (m *Metrics) declarePassSeries() {
	m.passes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "readsync_passes_total",
		Help: "Passes finished, by schedule (empty for a backfill over several), trigger and status (ok, partial, failed).",
	}, []string{"schedule", "trigger", "status"})
	m.passDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "readsync_pass_duration_seconds",
		Help:    "Wall time of a pass, from its start to its run record.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 12), // 0.5s to about 17 minutes
	}, []string{"schedule", "trigger"})
	m.lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "readsync_last_success_timestamp_seconds",
		Help: "Unix time at which the schedule's last pass with every name synced finished.",
	}, []string{"schedule"})
	m.namesFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "readsync_names_failed_total",
		Help: "nft names that failed in a pass, by schedule.",
	}, []string{"schedule"})
	m.apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "readsync_api_requests_total",
		Help: "Upstream request attempts, retries included, by operation and outcome.",
	}, []string{"operation", "outcome"})
	m.apiDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "readsync_api_request_duration_seconds",
		Help:    "Duration of upstream request attempts, body included, by operation.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14), // 5ms to about 40s
	}, []string{"operation"})
	m.breakerOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "readsync_upstream_breaker_open",
		Help: "1 from the moment a pass stopped asking an unavailable upstream until a name of a later pass succeeds, else 0.",
	})
	m.breakerTrips = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "readsync_upstream_breaker_trips_total",
		Help: "Passes that stopped asking the upstream because it did not answer.",
	})
}

// declareWriteSeries declares the series of what reaches ClickHouse or the spool.
func (m *Metrics) declareWriteSeries() {
	m.rowsWritten = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "readsync_rows_written_total",
		Help: "Rows ClickHouse confirmed, by table (spool replays included).",
	}, []string{"table"})
	m.inserts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "readsync_inserts_total",
		Help: "INSERT statements sent to ClickHouse, by table and outcome (ok, error).",
	}, []string{"table", "outcome"})
	m.rowsSpooled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "readsync_rows_spooled_total",
		Help: "Rows ClickHouse did not take that went to the spool.",
	})
}

// declareShardSeries declares the series of the shard a process takes.
func (m *Metrics) declareShardSeries() {
	m.shardIndex = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "readsync_shard_index",
		Help: "The shard of the scheduled names this process took at its last pass (READSYNC_SHARD's i), 0 without sharding; at or above readsync_shards, it took none.",
	})
	m.shardReadFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "readsync_shard_count_read_failures_total",
		Help: "Reads of the StatefulSet's replicas that failed (READSYNC_SHARD=<pod>/statefulset); the last count read stays in use meanwhile.",
	})
}

// declareReconcileSeries declares the series of the reconcile's steps.
func (m *Metrics) declareReconcileSeries() {
	m.reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "readsync_reconciles_total",
		Help: "Reconcile steps, each a bounded part of what changed in the stored history, by outcome: ok, error, or deferred (another daemon runs the steps).",
	}, []string{"outcome"})
	m.reconcileReached = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "readsync_reconcile_reached_timestamp_seconds",
		Help: "Unix time of change before which the reconcile has read every change, as of this process's last step; 0 before its first.",
	})
	m.reconcilePending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "readsync_reconcile_pending_changes",
		Help: fmt.Sprintf("Changes recorded in the change logs that the reconcile has not read yet, counted up to %d a log, as of this process's last step; 0 while another daemon runs the steps.", derived.PendingCap),
	})
	m.reconcileRewritten = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "readsync_reconcile_rewritten_total",
		Help: "Rows of reads gained that a reconcile found stale or missing and wrote again: a write whose refresh did not run or read a stale replica, or rows written by another process or by hand.",
	})
}

// registerReadOnScrape registers the series whose value is fixed (the
// build's) or read when scraped: the last delivery, its state, and the
// shard count under both its names.
func (m *Metrics) registerReadOnScrape(version, commit string) {
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "readsync_build_info",
		Help: "Always 1; the labels say which build is running.",
	}, []string{"version", "commit", "goversion"})
	buildInfo.WithLabelValues(version, commit, runtime.Version()).Set(1)
	deliveredAt := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "readsync_last_delivery_timestamp_seconds",
		Help: "Unix time at which rows last reached ClickHouse (an INSERT it confirmed, spool replays included); 0 for never since start.",
	}, func() float64 {
		if at := m.delivery.state().At; !at.IsZero() {
			return float64(at.Unix())
		}
		return 0
	})
	shards := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "readsync_shards",
		Help: "How many shards the scheduled names were split into at this process's last pass (READSYNC_SHARD's n, or its StatefulSet's replicas), 1 without sharding.",
	}, func() float64 { return float64(m.shards.Load()) })
	// The name readsync_shards replaced: _count is reserved for the series of
	// histograms and summaries, and a metrics lint (promtool check metrics)
	// rejects a gauge of that name. It stays for a deprecation period, so
	// that alerts and dashboards can move over, untyped, which the lint
	// accepts and PromQL queries as it did the gauge.
	shardsDeprecated := prometheus.NewUntypedFunc(prometheus.UntypedOpts{
		Name: "readsync_shard_count",
		Help: "Deprecated: replaced by readsync_shards, which has the same value; to be removed after a deprecation period (README, Monitoring).",
	}, func() float64 { return float64(m.shards.Load()) })
	m.register(shards, shardsDeprecated, buildInfo, deliveredAt)
	for _, state := range []string{DeliveryOK, DeliveryRefused, DeliveryUnavailable} {
		m.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "readsync_delivery_state",
			Help:        "1 for how the last write to ClickHouse (an INSERT or a migration) ended: ok, refused (the server answered and will not take it) or unavailable (no answer); all 0 before the first.",
			ConstLabels: prometheus.Labels{"state": state},
		}, func() float64 {
			if m.delivery.state().State == state {
				return 1
			}
			return 0
		}))
	}
}

// register registers collectors in the process's registry.
func (m *Metrics) register(cs ...prometheus.Collector) {
	m.reg.MustRegister(cs...)
	m.all = append(m.all, cs...)
}

// ObserveRequest is the API client's hook.
func (m *Metrics) ObserveRequest(op, outcome string, d time.Duration) {
	m.apiRequests.WithLabelValues(op, outcome).Inc()
	m.apiDuration.WithLabelValues(op).Observe(d.Seconds())
}

// ObserveBreaker is the passes' hook: a breaker tripped (open) or a pass's
// first name succeeded.
func (m *Metrics) ObserveBreaker(open bool) {
	if open {
		m.breakerTrips.Inc()
		m.breakerOpen.Set(1)
		return
	}
	m.breakerOpen.Set(0)
}

// ObserveInsert is the ClickHouse sink's hook.
func (m *Metrics) ObserveInsert(table string, rows int, _ time.Duration, err error) {
	m.delivery.observe(err)
	if err != nil {
		m.inserts.WithLabelValues(table, "error").Inc()
		return
	}
	m.inserts.WithLabelValues(table, "ok").Inc()
	m.rowsWritten.WithLabelValues(table).Add(float64(rows))
}

// ObservePass records a finished pass.
func (m *Metrics) ObservePass(rep sync.Report, d time.Duration) {
	r := rep.Run
	m.passes.WithLabelValues(r.Schedule, r.Trigger, r.Status).Inc()
	m.passDuration.WithLabelValues(r.Schedule, r.Trigger).Observe(d.Seconds())
	m.namesFailed.WithLabelValues(r.Schedule).Add(float64(r.NFTFailed))
	m.rowsSpooled.Add(float64(rep.Spooled))
	m.observeReads(workPass, rep.ReadRows, rep.ReadBytes)
	if r.Status == sync.StatusOK {
		m.lastSuccess.WithLabelValues(r.Schedule).Set(float64(time.Now().Unix()))
	}
}

// ArmSchedule gives a schedule's cron series a value from the start: 0
// passes of each status, 0 names failed, and a last success at 0 (1970),
// so that an alert on the time since the last success, or on partial
// passes outnumbering good ones, fires for a schedule that never succeeds
// rather than waiting for a series that never appears.
func (m *Metrics) ArmSchedule(schedule string) {
	for _, status := range []string{sync.StatusOK, sync.StatusPartial, sync.StatusFailed} {
		m.passes.WithLabelValues(schedule, sync.TriggerCron, status)
	}
	m.namesFailed.WithLabelValues(schedule)
	m.lastSuccess.WithLabelValues(schedule).Set(0)
	m.names.arm(schedule)
}

// ObserveSpool exports the spool's size, quarantine and refusals, read
// when scraped.
func (m *Metrics) ObserveSpool(sp *spool.Spool) {
	m.register(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "readsync_spool_bytes",
			Help: "Bytes of entries waiting in the spool.",
		}, func() float64 { return float64(sp.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "readsync_spool_entries",
			Help: "Entries (batches of rows or run records) waiting in the spool.",
		}, func() float64 { return float64(sp.Stats().Entries) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "readsync_spool_quarantined_entries",
			Help: "Entries moved aside into the spool's quarantine/ folder (refused by ClickHouse for what they hold, or unreadable), waiting for an operator: readsync --flush-spool --retry-quarantined.",
		}, func() float64 { return float64(sp.Stats().Quarantined) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "readsync_spool_refused_rows_total",
			Help: "Rows the spool refused because it was full; they are lost.",
		}, func() float64 { return float64(sp.Stats().RefusedRows) }),
	)
}

// ObserveShare records the share a pass took: pods of one StatefulSet
// that disagree on the count for longer than a tick cover some names twice
// and others not at all.
func (m *Metrics) ObserveShare(s shard.Share) {
	m.shardIndex.Set(float64(s.Index))
	m.shards.Store(s.Count)
	m.share.Store(&s)
}

// Share is the share the process's last pass took (ObserveShare), every
// name before the first.
func (m *Metrics) Share() shard.Share {
	if s := m.share.Load(); s != nil {
		return *s
	}
	return shard.All()
}

// ObserveReconcile records the steps of a one-off command's reconcile;
// the last failed when err is set.
func (m *Metrics) ObserveReconcile(rep derived.ReconcileReport, err error) {
	ok := rep.Steps
	if err != nil {
		m.reconciles.WithLabelValues("error").Inc()
		ok--
	}
	m.reconciles.WithLabelValues("ok").Add(float64(max(ok, 0)))
	m.reconcileRewritten.Add(float64(rep.Rewritten))
	m.observeReads(workReconcile, rep.ReadRows, rep.ReadBytes)
}

// ObserveReconcileStep records a step of the daemon's reconcile loop.
func (m *Metrics) ObserveReconcileStep(rep derived.StepReport, _ time.Duration, err error) {
	m.observeReads(workReconcile, rep.ReadRows, rep.ReadBytes)
	switch {
	case err != nil:
		m.reconciles.WithLabelValues("error").Inc()
	case rep.HeldBy != "":
		m.reconciles.WithLabelValues("deferred").Inc()
		// The daemon that runs the steps reports what waits.
		m.reconcilePending.Set(0)
	default:
		m.reconciles.WithLabelValues("ok").Inc()
		m.reconcileRewritten.Add(float64(rep.Rewritten))
		m.reconcileReached.Set(float64(rep.Reached.Unix()))
		m.reconcilePending.Set(float64(rep.Pending))
	}
}

// ObserveNothingOwed records a tick at which the schedule had no names in
// this process's share: every name it owed was synced, trivially, so an
// alert on the time since the last success stays quiet for it.
func (m *Metrics) ObserveNothingOwed(schedule string) {
	m.lastSuccess.WithLabelValues(schedule).Set(float64(time.Now().Unix()))
}

// Registry is the registry every series is registered in, for the
// /metrics handler.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Collectors returns every collector registered, so that the reference of
// metrics can be held to what is registered (a vector's series appear in
// the registry only once they have a value).
func (m *Metrics) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector(nil), m.all...)
}

// ShardReadFailed counts a failed read of a StatefulSet's replicas.
func (m *Metrics) ShardReadFailed() { m.shardReadFailures.Inc() }

// ObserveDelivery records how an attempt to write to ClickHouse that is
// not an INSERT (a migration) ended; ObserveInsert records the INSERTs.
func (m *Metrics) ObserveDelivery(err error) { m.delivery.observe(err) }

// Delivery returns how the last attempt to write to ClickHouse ended, and
// when rows last reached it.
func (m *Metrics) Delivery() DeliveryState { return m.delivery.state() }

// ObserveNames records a resolution of the schedule's names at a pass.
func (m *Metrics) ObserveNames(schedule string, res sync.Resolution) { m.names.observe(schedule, res) }

// ObserveNameHealth sets the series of the failing names of each schedule
// (readsync_names_failing, readsync_names_not_read,
// readsync_names_failing_passes_max) from name_health, read by schedule.
func (m *Metrics) ObserveNameHealth(health map[string]clickhouse.NamesFailing) {
	m.names.observeHealth(health)
}

// ForgetNameHealth removes those series when name_health cannot be read:
// absent, an alert on them resolves rather than firing on stale counts
// (the database's own alerts say why).
func (m *Metrics) ForgetNameHealth() { m.names.forgetHealth() }
