package sink

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Time is a point in time as a ClickHouse DateTime holds it: whole seconds
// since 1970-01-01 00:00:00 UTC, up to 2106-02-07 06:28:15. Rows carry
// their times in this form, 4 bytes where a time.Time takes 24, because a
// batch holds tens of thousands of rows and every byte of a row is paid for
// twice while one batch is written and the next one fills.
type Time uint32

// MinTime and MaxTime are the first and last second a ClickHouse DateTime
// holds.
var (
	MinTime = time.Unix(0, 0).UTC()
	MaxTime = time.Unix(math.MaxUint32, 0).UTC()
)

// ErrTimeRange marks a time that a ClickHouse DateTime cannot hold.
var ErrTimeRange = errors.New("outside what a ClickHouse DateTime holds (1970 to 2106)")

// CheckTime returns an error wrapping ErrTimeRange when t is before MinTime
// or after MaxTime. Times that come from outside (the API, the command
// line) are checked with it before they become a Time.
func CheckTime(t time.Time) error {
	if t.Before(MinTime) || t.After(MaxTime) {
		return fmt.Errorf("%s is %w", t.UTC().Format(time.RFC3339), ErrTimeRange)
	}
	return nil
}

// TimeOf returns t as a Time, dropping fractions of a second. A time outside
// what a DateTime holds is clamped to its first or last second rather than
// wrapped around: callers check the range of times that come from outside
// with CheckTime, so only a wrong clock gets here.
func TimeOf(t time.Time) Time {
	s := t.Unix()
	switch {
	case s < MinTime.Unix():
		return Time(MinTime.Unix())
	case s > MaxTime.Unix():
		return Time(MaxTime.Unix())
	}
	return Time(s)
}

// Time returns t as a time.Time in UTC.
func (t Time) Time() time.Time { return time.Unix(int64(t), 0).UTC() }

// String formats t as RFC 3339 in UTC.
func (t Time) String() string { return t.Time().Format(time.RFC3339) }

// MarshalJSON writes t as an RFC 3339 string in UTC, the way the
// time.Time these fields used to be was written, so spool entries and
// dry-run output keep their format.
func (t Time) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(`"2006-01-02T15:04:05Z"`))
	b = append(b, '"')
	b = t.Time().AppendFormat(b, time.RFC3339)
	return append(b, '"'), nil
}

// UnmarshalJSON reads an RFC 3339 string, with or without fractions of a
// second and in any zone, as older spool entries hold them.
func (t *Time) UnmarshalJSON(b []byte) error {
	var v time.Time
	if err := v.UnmarshalJSON(b); err != nil {
		return fmt.Errorf("time %s: %w", b, err)
	}
	*t = TimeOf(v)
	return nil
}
