package chconn

import (
	"cmp"

	"github.com/readsync/readsync/sink"
)

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

// Period is a span of UTC time, in seconds, that rollups are keyed by: a
// day or an hour. For a period other than a day, a ProjectDay's Day is
// the index of the period since the Unix epoch.
type Period uint32

// The periods.
const (
	Hour Period = 3600
	Day  Period = 86400
)

// Of is the index of the period of the Unix time t since the epoch.
func (p Period) Of(t uint32) uint32 { return t / uint32(p) }

// Start is the Unix time the period of index i starts at.
func (p Period) Start(i uint32) uint32 { return i * uint32(p) }

// Column is the name of the column the rollups of the period key rows by.
func (p Period) Column() string {
	if p == Day {
		return "day"
	}
	return "hour"
}

// Type is that column's type: a Date for a day, else a DateTime.
func (p Period) Type() string {
	if p == Day {
		return "Date"
	}
	return "DateTime"
}

// Literal writes the start of the period of index i as a value of the
// column.
func (p Period) Literal(i uint32) string {
	if p == Day {
		return QuoteDate(sink.Time(p.Start(i)).Time())
	}
	return DateTime(p.Start(i))
}
