package apiclient

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"7", 7 * time.Second, true},
		{"-3", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"86400", maxRetryAfter, true},
		{"99999999999999999999", 0, false},
		{"Sat, 21 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Sat, 21 Nov 2026 11:00:00 GMT", 0, true},
		{"Sun, 22 Nov 2026 12:00:00 GMT", maxRetryAfter, true},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %s, %t; want %s, %t", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
