package derived

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink/schema"
)

// A tip reads back as it was written, and sorts as the tip rollup needs:
// by its snapshot first, then by its day's key; a reset outranks every tip
// of its snapshot and reads back as none.
func TestTipEncoding(t *testing.T) {
	sum := func(snapshots uint64, reads int64, key ...int64) daySum {
		s := newDaySum()
		s.snapshots, s.reads, s.newMessages, s.missed = snapshots, reads, 3, 4
		for i, k := range key {
			s.key[i].SetInt64(k)
		}
		return *s
	}
	huge := sum(7, -5, 1)
	huge.key[7].Exp(big.NewInt(10), big.NewInt(44), nil) // a component of 45 digits
	tips := []tip{
		{at: 1_700_000_000, day: sum(1, 10, 1, 2, 3), hour: sum(1, 10, 1, 2, 3)},
		{at: 1_700_000_000, day: sum(2, 12, 1), hour: sum(1, 2, 1)},
		{at: 1_700_000_060, day: sum(1, 0), hour: huge},
		{at: math.MaxUint32, day: huge, hour: sum(0, math.MinInt64)},
	}
	for i, tp := range tips {
		enc := tp.encode()
		if len(enc) != tipLen {
			t.Fatalf("tip %d: %d bytes, want %d", i, len(enc), tipLen)
		}
		got, ok := decodeTip(enc)
		if !ok {
			t.Fatalf("tip %d does not decode", i)
		}
		if got.encode() != enc {
			t.Errorf("tip %d: read back as %+v, want %+v", i, got, tp)
		}
		if i > 0 && strings.Compare(enc, tips[i-1].encode()) <= 0 {
			t.Errorf("tip %d does not sort after tip %d", i, i-1)
		}
		reset := resetTip(tp.at)
		if reset <= enc {
			t.Errorf("the reset of tip %d's snapshot does not outrank it", i)
		}
		if i+1 < len(tips) && tips[i+1].at > tp.at && reset >= tips[i+1].encode() {
			t.Errorf("the reset of tip %d's snapshot outranks the next snapshot's tip", i)
		}
		if _, ok := decodeTip(reset); ok {
			t.Errorf("the reset of tip %d decodes as a tip", i)
		}
	}
}

// The values of a period computed in Go carry the key the server's
// refresh computes: each sum offset by 10^19, 20 digits each.
func TestPeriodValuesKey(t *testing.T) {
	var v periodValues
	v.add(snapRow{at: 100, version: 5<<32 + 7, reads: 3, total: 10})
	v.add(snapRow{at: 200, version: 1<<32 + 1, reads: 4, total: 10})
	want := "10000000000000000002" + "10000000000000000300" + "10000000000000000006" + "10000000000000000008"
	if got := v.key(); got != want {
		t.Errorf("key %s, want %s", got, want)
	}
	if got := schema.HourRowOf(want, 2, 7, 20); len(got) != len(want)+24 || got[:len(want)] != want {
		t.Errorf("hour row %q", got)
	}
}
