package sync

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestParsePercent(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{"50.00%", 50, false},
		{"0.00%", 0, false},
		{"100.00%", 100, false},
		{"33.33%", 33.33, false},
		{" 12.5 % ", 12.5, false},
		{"7", 7, false},
		{"", 0, true},
		{"%", 0, true},
		{"abc%", 0, true},
		{"NaN%", 0, true},
		{"Inf%", 0, true},
		{"-1.00%", 0, true},
		{"50,00%", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePercent(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParsePercent(%q) error = %v, wantErr %t", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParsePercent(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestComputePercent(t *testing.T) {
	tests := []struct {
		read, total uint64
		want        float64
	}{
		{0, 0, 0},
		{5, 0, 0},
		{1, 2, 50},
		{1, 3, 33.33},
		{2, 3, 66.67},
		{3, 3, 100},
		{math.MaxUint32, math.MaxUint32, 100},
	}
	for _, tt := range tests {
		if got := ComputePercent(tt.read, tt.total); got != tt.want {
			t.Errorf("ComputePercent(%d, %d) = %v, want %v", tt.read, tt.total, got, tt.want)
		}
	}
}

func TestParseSourceTime(t *testing.T) {
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      string
		loc     *time.Location
		want    time.Time
		wantErr error
	}{
		{"utc", "2026-03-04 05:06:07", time.UTC, time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), nil},
		{"zone shifts to utc", "2026-03-04 08:00:00", shanghai, time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), nil},
		{"zero placeholder", "0000-00-00 00:00:00", time.UTC, time.Time{}, ErrZeroDate},
		{"empty", "", time.UTC, time.Time{}, errAny},
		{"iso layout", "2026-03-04T05:06:07Z", time.UTC, time.Time{}, errAny},
		{"date only", "2026-03-04", time.UTC, time.Time{}, errAny},
		{"impossible day", "2026-02-30 00:00:00", time.UTC, time.Time{}, errAny},
		{"before 1970", "1969-12-31 23:59:59", time.UTC, time.Time{}, errAny},
		{"after 2106", "2107-01-01 00:00:00", time.UTC, time.Time{}, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSourceTime(tt.in, tt.loc)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr == errAny && err == nil, tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if !got.Equal(tt.want) || (err == nil && got.Location() != time.UTC) {
				t.Errorf("got %v, want %v in UTC", got, tt.want)
			}
		})
	}
}

var errAny = errors.New("any error")
