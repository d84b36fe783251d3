package derived

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink"
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

// A write at the tip is a project's rows all at one snapshot, each
// message's highest version once, in message order; a project written at
// two snapshots is none, and the rows of other projects between its own
// do not split it.
func TestOneWrites(t *testing.T) {
	row := func(project, message int64, at sink.Time, version uint64) sink.Snapshot {
		return sink.Snapshot{ProjectID: project, MessageID: message, SnapshotAt: at, Version: version, ReadCount: version * 10}
	}
	written := []sink.Snapshot{
		row(2, 9, 100, 1),
		row(1, 5, 100, 1),
		row(2, 3, 100, 1),
		row(3, 1, 100, 1),
		row(2, 9, 100, 4), // a newer version of message 9
		row(3, 1, 160, 2), // project 3 at two snapshots
		row(2, 9, 100, 2),
	}
	var got []string
	for _, w := range oneWrites(written) {
		var rows []string
		for _, i := range w.rows {
			rows = append(rows, fmt.Sprintf("%d@v%d", written[i].MessageID, written[i].Version))
		}
		got = append(got, fmt.Sprintf("project %d at %d: %s", w.project, w.at, strings.Join(rows, " ")))
	}
	want := []string{"project 1 at 100: 5@v1", "project 2 at 100: 3@v1 9@v4"}
	if !slices.Equal(got, want) {
		t.Errorf("oneWrites:\n got %q\nwant %q", got, want)
	}
}

// Each message of a write or of its project's latest rows is seen once,
// in order, with its row written and its latest row before.
func TestEachMessage(t *testing.T) {
	written := []sink.Snapshot{
		{ProjectID: 1, MessageID: 4, SnapshotAt: 200, Version: 7, ReadCount: 40},
		{ProjectID: 1, MessageID: 2, SnapshotAt: 200, Version: 7, ReadCount: 20},
	}
	w := oneWrites(written)[0]
	latest := []msgRow{
		{1, 1, snapRow{at: 100, reads: 1}},
		{1, 2, snapRow{at: 100, reads: 2}},
		{1, 9, snapRow{at: 50, reads: 9}},
	}
	var got []string
	eachMessage(w, written, latest, func(cur, prev *snapRow) {
		s := "-"
		if cur != nil {
			s = fmt.Sprint(cur.reads)
		}
		if prev != nil {
			s += fmt.Sprintf("/%d", prev.reads)
		}
		got = append(got, s)
	})
	want := []string{"-/1", "20/2", "40", "-/9"}
	if !slices.Equal(got, want) {
		t.Errorf("eachMessage: got %q, want %q", got, want)
	}
}
