package sync

import (
	"math"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
)

func FuzzParsePercent(f *testing.F) {
	for _, s := range []string{"50.00%", "0.00%", "", "%", "1e308%", "-0%", "NaN", "0x1p-2%", " 7 % "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParsePercent(s)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0) || v < 0) {
			t.Fatalf("ParsePercent(%q) = %v without error", s, v)
		}
	})
}

func FuzzParseSourceTime(f *testing.F) {
	for _, s := range []string{"2026-01-02 03:04:05", "0000-00-00 00:00:00", "", "2106-02-07 06:28:15", "1970-01-01 00:00:00", "9999-12-31 23:59:59"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSourceTime(s, time.UTC)
		if err != nil {
			return
		}
		if sink.CheckTime(got) != nil || got.Location() != time.UTC {
			t.Fatalf("ParseSourceTime(%q) = %v: outside a DateTime or not UTC", s, got)
		}
		// Lenient inputs (a one-digit hour) are fine; what is stored must
		// read back as itself.
		again, err := ParseSourceTime(got.Format(SourceTimeLayout), time.UTC)
		if err != nil || !again.Equal(got) {
			t.Fatalf("ParseSourceTime(%q) = %v, which reads back as %v, %v", s, got, again, err)
		}
	})
}
