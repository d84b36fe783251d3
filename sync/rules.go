package sync

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/readsync/readsync/sink"
)

// SourceTimeLayout is the layout of the API's create_at values.
const SourceTimeLayout = "2006-01-02 15:04:05"

// epoch is what an unusable create_at is stored as: the zero of a
// ClickHouse DateTime, which dashboards read as "unknown".
var epoch = sink.MinTime

// ParsePercent reads the upstream's percent text, "50.00%" or "50.00", as a
// number of percent. It rejects empty text, NaN, infinities and negatives.
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSpace(strings.TrimSuffix(t, "%"))
	if t == "" {
		return 0, fmt.Errorf("percent %q is empty", s)
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("percent %q: %w", s, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("percent %q is not a finite non-negative number", s)
	}
	return v, nil
}

// ComputePercent is read_count/total in percent, rounded to the two
// fractional digits the upstream uses, and 0 when total is 0.
func ComputePercent(readCount, total uint64) float64 {
	if total == 0 {
		return 0
	}
	return math.Round(float64(readCount)/float64(total)*10000) / 100
}

// ErrZeroDate marks the placeholder date "0000-00-00 00:00:00".
var ErrZeroDate = errors.New("zero date")

// ParseSourceTime reads a create_at value in loc and returns it in UTC. It
// fails for the zero placeholder, text that is not in SourceTimeLayout, and
// times a ClickHouse DateTime cannot hold.
func ParseSourceTime(s string, loc *time.Location) (time.Time, error) {
	if strings.HasPrefix(s, "0000-00-00") {
		return time.Time{}, fmt.Errorf("create_at %q: %w", s, ErrZeroDate)
	}
	t, err := time.ParseInLocation(SourceTimeLayout, s, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("create_at %q: %w", s, err)
	}
	if err := sink.CheckTime(t); err != nil {
		return time.Time{}, fmt.Errorf("create_at %q: %w", s, err)
	}
	return t.UTC(), nil
}
