package main

import (
	"testing"

	"github.com/readsync/readsync/sync"
)

// The shard gauges say which part of the names a pod handles, so that an
// alert can catch pods of one StatefulSet that disagree on the count.
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
		s, err := sync.ParseShard(tt.shard)
		if err != nil {
			t.Fatal(err)
		}
		m := newMetrics()
		m.observeShare(shareOf(s))
		families, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			if n := f.GetName(); n == "readsync_shard_index" || n == "readsync_shard_count" {
				got[n] = f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		want := map[string]float64{"readsync_shard_index": tt.index, "readsync_shard_count": tt.count}
		for name, v := range want {
			if g, ok := got[name]; !ok || g != v {
				t.Errorf("READSYNC_SHARD %q: %s = %v (exported %t), want %v", tt.shard, name, g, ok, v)
			}
		}
	}
}
