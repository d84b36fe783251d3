package derived

import (
	"math"
	"slices"
	"testing"

	"github.com/readsync/readsync/sink/chconn"
)

// The ranges a step reads after a position: its second's rest, then
// windows that widen from the position, or from the log's oldest change
// when the position is long before it.
func TestAfterRanges(t *testing.T) {
	const (
		p       = uint32(1_700_000_000) // a recorded position
		horizon = p + 20*86400
	)
	win := func(lo, hi uint32) string {
		return "changed_at > " + chconn.DateTime(lo) + " AND changed_at <= " + chconn.DateTime(hi)
	}
	same := []string{"project_id > 7"}
	for _, tc := range []struct {
		name    string
		at      uint32
		open    bool
		first   uint32
		now     uint32
		horizon uint32
		want    []string
	}{
		{name: "the start, no oldest change known", at: 0, open: true, horizon: horizon, want: []string{
			"changed_at = " + chconn.DateTime(0), win(0, 60), win(60, 3600), win(3600, 86400), win(86400, 16*86400), win(16*86400, horizon)}},
		{name: "the start, the oldest change known", at: 0, open: true, first: p, horizon: horizon, want: []string{
			win(p-1, p+59), win(p+59, p-1+3600), win(p-1+3600, p-1+86400), win(p-1+86400, p-1+16*86400), win(p-1+16*86400, horizon)}},
		{name: "the start, the oldest change a minute before the horizon", at: 0, open: true, first: p, horizon: p + 30, want: []string{
			win(p-1, p+30)}},
		{name: "the start, an empty log's bound past the horizon", at: 0, open: true, first: p + 31, horizon: p + 30, want: nil},
		{name: "a recorded position after the oldest change", at: p, first: p - 86400, horizon: p + 100, want: []string{
			"changed_at = " + chconn.DateTime(p) + " AND project_id > 7", win(p, p+60), win(p+60, p+100)}},
		{name: "a recorded position in the second before the oldest change", at: p, first: p + 1, horizon: p + 100, want: []string{
			"changed_at = " + chconn.DateTime(p) + " AND project_id > 7", win(p, p+60), win(p+60, p+100)}},
		{name: "no horizon, the oldest change seconds before now", at: 0, open: true, first: p, now: p + 30, horizon: math.MaxUint32, want: []string{
			win(p-1, math.MaxUint32)}},
		{name: "no horizon, a recorded position two days before now", at: p, now: p + 2*86400, horizon: math.MaxUint32, want: []string{
			"changed_at = " + chconn.DateTime(p) + " AND project_id > 7", win(p, p+60), win(p+60, p+3600), win(p+3600, p+86400), win(p+86400, math.MaxUint32)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := reach{first: tc.first, now: tc.now, horizon: tc.horizon}
			if r.now == 0 {
				r.now = r.horizon + 10 // a step that records: its horizon settled before now
			}
			got := afterRanges(tc.at, tc.open, same, r)
			if !slices.Equal(got, tc.want) {
				t.Errorf("afterRanges(%d, %v, %q, %+v):\n got %q\nwant %q", tc.at, tc.open, same, r, got, tc.want)
			}
		})
	}
}
