package sink

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Small helpers of the refreshes and folds: sorted keys, so that a
// refresh's rows (and so its INSERT's deduplication token) do not depend
// on map order, lists for IN (…), and Unix times as ClickHouse's
// DateTime holds them.

// sortedKeys returns m's keys in order.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sortedTargets returns m's targets by project and snapshot, so that the
// rows of a refresh, and so its INSERT's token, do not depend on map order.
func sortedTargets[V any](m map[gainTarget]V) []gainTarget {
	ts := make([]gainTarget, 0, len(m))
	for t := range m {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b gainTarget) int { return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.at, b.at)) })
	return ts
}

// joinInts writes xs as a list for IN (…).
func joinInts[T int64 | uint32](xs []T) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(int64(x), 10))
	}
	return b.String()
}

// dayStart is the start of the UTC day of the Unix time t.
func dayStart(t uint32) uint32 { return t - t%86400 }

// unixUTC is the Unix time t in UTC.
func unixUTC(t uint32) time.Time { return time.Unix(int64(t), 0).UTC() }
