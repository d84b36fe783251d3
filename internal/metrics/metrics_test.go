package metrics_test

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/readsync/readsync/internal/metrics"
	"github.com/readsync/readsync/internal/shard"
)

// The shard gauges say which part of the names a pod handles, so that an
// alert can catch pods of one StatefulSet that disagree on the count. The
// count is exported under its deprecated name too, untyped, with a help
// that names its replacement.
func TestShardMetrics(t *testing.T) {
	tests := []struct {
		shard        string
		index, count float64
	}{
		{"", 0, 1},
		{"2/3", 2, 3},
		{"readsync-4/5", 4, 5},
	}
	// A StatefulSet's pod reports the count it used at its last pass.
	for _, tt := range tests {
		s, err := shard.Parse(tt.shard)
		if err != nil {
			t.Fatal(err)
		}
		m := metrics.New("dev", "unknown")
		m.ObserveShare(s)
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]struct {
			value float64
			typ   dto.MetricType
		}{
			"readsync_shard_index": {tt.index, dto.MetricType_GAUGE},
			"readsync_shards":      {tt.count, dto.MetricType_GAUGE},
			"readsync_shard_count": {tt.count, dto.MetricType_UNTYPED},
		}
		for _, f := range families {
			w, ok := want[f.GetName()]
			if !ok {
				continue
			}
			delete(want, f.GetName())
			mt := f.GetMetric()[0]
			got := mt.GetGauge().GetValue()
			if f.GetType() == dto.MetricType_UNTYPED {
				got = mt.GetUntyped().GetValue()
			}
			if f.GetType() != w.typ || got != w.value {
				t.Errorf("READSYNC_SHARD %q: %s = %v (%v), want %v (%v)", tt.shard, f.GetName(), got, f.GetType(), w.value, w.typ)
			}
			if f.GetName() == "readsync_shard_count" && !strings.HasPrefix(f.GetHelp(), "Deprecated: replaced by readsync_shards") {
				t.Errorf("readsync_shard_count's help %q does not say it is deprecated and what replaced it", f.GetHelp())
			}
		}
		for name := range want {
			t.Errorf("READSYNC_SHARD %q: %s not exported", tt.shard, name)
		}
	}
}

// The breaker gauge follows the passes: 1 from a trip until a later
// name succeeds; the counter counts trips.
func TestBreakerMetrics(t *testing.T) {
	m := metrics.New("dev", "unknown")
	value := func(name string) float64 {
		t.Helper()
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				mt := f.GetMetric()[0]
				if g := mt.GetGauge(); g != nil {
					return g.GetValue()
				}
				return mt.GetCounter().GetValue()
			}
		}
		t.Fatalf("%s is not exported", name)
		return 0
	}
	steps := []struct {
		open        *bool
		gauge, trip float64
	}{
		{nil, 0, 0},
		{ptr(true), 1, 1},
		{ptr(false), 0, 1},
		{ptr(true), 1, 2},
	}
	for i, s := range steps {
		if s.open != nil {
			m.ObserveBreaker(*s.open)
		}
		if g, c := value("readsync_upstream_breaker_open"), value("readsync_upstream_breaker_trips_total"); g != s.gauge || c != s.trip {
			t.Errorf("step %d: open %v, trips %v; want %v, %v", i, g, c, s.gauge, s.trip)
		}
	}
}

func ptr[T any](v T) *T { return &v }
