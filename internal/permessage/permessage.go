// Package permessage reports benchmark figures per message, the unit the
// project's performance targets scale with. It is for benchmarks only.
package permessage

import (
	"runtime"
	"testing"
)

// Loop runs op, which handles msgs messages, under b.Loop and reports time
// and allocations per message besides the per-op figures.
func Loop(b *testing.B, msgs int, op func()) {
	b.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		op()
	}
	runtime.ReadMemStats(&after)
	n := float64(b.N) * float64(msgs)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/msg")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/msg")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/msg")
}
