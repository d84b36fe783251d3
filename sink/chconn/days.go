package chconn

import "cmp"

// Days of Unix times as ClickHouse's DateTime holds them, alone or a
// project's: what the day rollups are keyed by.

// DayStart is the start of the UTC day of the Unix time t.
func DayStart(t uint32) uint32 { return t - t%86400 }

// DayOf is the UTC day of the Unix time t, in days since the epoch.
func DayOf(t uint32) uint32 { return t / 86400 }

// ProjectDay is a project's UTC day, as days since the Unix epoch.
type ProjectDay struct {
	Project int64
	Day     uint32
}

// Compare orders project days by project, then day.
func (a ProjectDay) Compare(b ProjectDay) int {
	return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(a.Day, b.Day))
}
