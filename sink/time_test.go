package sink_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/readsync/readsync/sink"
)

func TestTimeOf(t *testing.T) {
	shanghai := time.FixedZone("UTC+8", 8*3600)
	for _, c := range []struct {
		name string
		in   time.Time
		want sink.Time
		utc  string
	}{
		{"whole second", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), 1767323045, "2026-01-02T03:04:05Z"},
		{"fraction dropped", time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.UTC), 1767323045, "2026-01-02T03:04:05Z"},
		{"other zone", time.Date(2026, 1, 2, 11, 4, 5, 0, shanghai), 1767323045, "2026-01-02T03:04:05Z"},
		{"epoch", time.Unix(0, 0), 0, "1970-01-01T00:00:00Z"},
		{"before 1970 clamped", time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), 0, "1970-01-01T00:00:00Z"},
		{"zero time clamped", time.Time{}, 0, "1970-01-01T00:00:00Z"},
		{"last second", time.Unix(math.MaxUint32, 0), math.MaxUint32, "2106-02-07T06:28:15Z"},
		{"after 2106 clamped", time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxUint32, "2106-02-07T06:28:15Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := sink.TimeOf(c.in)
			if got != c.want || got.String() != c.utc {
				t.Errorf("TimeOf(%v) = %d (%s), want %d (%s)", c.in, got, got, c.want, c.utc)
			}
			if got.Time().Location() != time.UTC {
				t.Errorf("Time() is in %v, want UTC", got.Time().Location())
			}
		})
	}
}

// CheckTime is the one range check of times from outside: the API's
// create_at and --snapshot-at go through it.
func TestCheckTime(t *testing.T) {
	for _, c := range []struct {
		name string
		in   time.Time
		ok   bool
	}{
		{"first second", time.Unix(0, 0), true},
		{"last second", time.Unix(math.MaxUint32, 0), true},
		{"in another zone", time.Date(1970, 1, 1, 8, 0, 0, 0, time.FixedZone("UTC+8", 8*3600)), true},
		{"a second before", time.Unix(-1, 0), false},
		{"a second after", time.Unix(math.MaxUint32+1, 0), false},
		{"zero time", time.Time{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := sink.CheckTime(c.in)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, sink.ErrTimeRange)) {
				t.Errorf("CheckTime(%v) = %v, want ok %t", c.in, err, c.ok)
			}
		})
	}
}

// Times are written the way time.Time wrote them, and read back from
// anything time.Time wrote, so spool entries of either form replay.
func TestTimeJSON(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 30, 45, 0, time.UTC)
	got, err := json.Marshal(sink.TimeOf(at))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(at)
	if string(got) != string(want) {
		t.Errorf("marshalled as %s, time.Time as %s", got, want)
	}
	for _, in := range []string{`"2026-11-21T12:30:45Z"`, `"2026-11-21T12:30:45.123456789Z"`, `"2026-11-21T20:30:45+08:00"`} {
		var v sink.Time
		if err := json.Unmarshal([]byte(in), &v); err != nil || v != sink.TimeOf(at) {
			t.Errorf("unmarshal %s = %s, %v; want %s", in, v, err, at)
		}
	}
	for _, in := range []string{`"yesterday"`, `1767323045`, `""`} {
		var v sink.Time
		if err := json.Unmarshal([]byte(in), &v); err == nil {
			t.Errorf("unmarshal %s = %s, want an error", in, v)
		}
	}
}

// A batch holds tens of thousands of rows; these sizes are what one costs.
func TestRowSizes(t *testing.T) {
	if n := unsafe.Sizeof(sink.Snapshot{}); n != 56 {
		t.Errorf("Snapshot is %d bytes, want 56: keep the 4-byte fields together", n)
	}
	if n := unsafe.Sizeof(sink.Message{}); n != 120 {
		t.Errorf("Message is %d bytes, want 120: keep the 4-byte fields together", n)
	}
}
