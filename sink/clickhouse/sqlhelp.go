package clickhouse

import (
	"cmp"
	"strconv"
	"strings"
)

// Small helpers of the refreshes and folds: lists for IN (…), and days of
// Unix times as ClickHouse's DateTime holds them, alone or a project's.

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

// dayOf is the UTC day of the Unix time t, in days since the epoch.
func dayOf(t uint32) uint32 { return t / 86400 }

// projectDay is a project's UTC day, as days since the Unix epoch.
type projectDay struct {
	project int64
	day     uint32
}

// compare orders project days by project, then day.
func (a projectDay) compare(b projectDay) int {
	return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.day, b.day))
}
