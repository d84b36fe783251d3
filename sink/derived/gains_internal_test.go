package derived

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink/chconn"
)

// TestGainScan feeds rows in the order the refresh reads them and checks
// each target's sums: the newest version of a snapshot counts, a prior
// row from before the rows read is a message's previous one, a message
// without one is new, and snapshots that are not targets only serve as
// previous rows.
func TestGainScan(t *testing.T) {
	type in struct {
		p, m    int64
		at      uint32
		version uint64
		reads   uint64
	}
	// Every row's total is ten times its reads.
	tests := []struct {
		name    string
		targets chconn.SnapshotSet
		all     bool
		priors  map[msgKey]snapRow
		rows    []in
		want    map[gainTarget]gainSum
	}{
		{
			name:    "new message counts from zero",
			targets: chconn.SnapshotSet{1: {100: true}},
			rows:    []in{{1, 1, 100, 5, 7}},
			want: map[gainTarget]gainSum{{1, 100}: {messages: 1, newMessages: 1, reads: 7, versions: uint128{0, 5},
				topVersion: 5, topMessages: 1, topReads: 7, topTotal: 70}},
		},
		{
			name:    "the newest version of a snapshot counts, against the previous snapshot's newest",
			targets: chconn.SnapshotSet{1: {200: true}},
			rows:    []in{{1, 1, 100, 5, 7}, {1, 1, 100, 6, 9}, {1, 1, 200, 8, 10}, {1, 1, 200, 9, 12}},
			want: map[gainTarget]gainSum{{1, 200}: {messages: 1, reads: 3, prevAt: 100, versions: uint128{0, 9}, prevAts: 100, prevVersions: uint128{0, 6},
				topVersion: 9, topMessages: 1, topReads: 12, topTotal: 120}},
		},
		{
			name:    "a prior row is the previous one of the first row read",
			targets: chconn.SnapshotSet{1: {200: true}},
			priors:  map[msgKey]snapRow{{1, 1}: {at: 50, version: 3, reads: 4, total: 40}},
			rows:    []in{{1, 1, 200, 8, 10}, {1, 2, 200, 8, 1}},
			want: map[gainTarget]gainSum{{1, 200}: {messages: 2, newMessages: 1, reads: 7, prevAt: 50, versions: uint128{0, 16},
				prevAts: 50, prevVersions: uint128{0, 3}, topVersion: 8, topMessages: 2, topReads: 11, topTotal: 110}},
		},
		{
			name:    "the newest write leaves out a message only an earlier write listed",
			targets: chconn.SnapshotSet{1: {100: true}},
			rows:    []in{{1, 1, 100, 5, 7}, {1, 1, 100, 6, 8}, {1, 2, 100, 5, 3}},
			want: map[gainTarget]gainSum{{1, 100}: {messages: 2, newMessages: 2, reads: 11, versions: uint128{0, 11},
				topVersion: 6, topMessages: 1, topReads: 8, topTotal: 80}},
		},
		{
			name: "every snapshot of every project with all",
			all:  true,
			rows: []in{{1, 1, 100, 1, 2}, {1, 1, 200, 2, 5}, {2, 1, 100, 1, 1}},
			want: map[gainTarget]gainSum{
				{1, 100}: {messages: 1, newMessages: 1, reads: 2, versions: uint128{0, 1}, topVersion: 1, topMessages: 1, topReads: 2, topTotal: 20},
				{1, 200}: {messages: 1, reads: 3, prevAt: 100, versions: uint128{0, 2}, prevAts: 100, prevVersions: uint128{0, 1},
					topVersion: 2, topMessages: 1, topReads: 5, topTotal: 50},
				{2, 100}: {messages: 1, newMessages: 1, reads: 1, versions: uint128{0, 1}, topVersion: 1, topMessages: 1, topReads: 1, topTotal: 10},
			},
		},
		{
			name:    "a lower count is a negative gain",
			targets: chconn.SnapshotSet{1: {200: true}},
			rows:    []in{{1, 1, 100, 1, 9}, {1, 1, 200, 2, 4}},
			want: map[gainTarget]gainSum{{1, 200}: {messages: 1, reads: minusFive, prevAt: 100, versions: uint128{0, 2}, prevAts: 100, prevVersions: uint128{0, 1},
				topVersion: 2, topMessages: 1, topReads: 4, topTotal: 40}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newGainScan(tt.targets, tt.all)
			for k, r := range tt.priors {
				s.priors[k] = r
			}
			for _, r := range tt.rows {
				s.row(msgKey{r.p, r.m}, snapRow{r.at, r.version, r.reads, 10 * r.reads})
			}
			s.finish()
			if len(s.sums) != len(tt.want) {
				t.Fatalf("%d targets summed, want %d: %v", len(s.sums), len(tt.want), s.sums)
			}
			for target, want := range tt.want {
				got := s.sums[target]
				if got == nil || *got != want {
					t.Errorf("target %v: %+v, want %+v", target, got, want)
				}
			}
		})
	}
}

// minusFive is -5 as the scan's wrapping sum holds it.
const minusFive = math.MaxUint64 - 4

// TestGainKeyOrdersAsTuple checks that keys compare as the tuples they
// encode, across the carry of a version sum into its high half, and that
// the day refresh reads each component back.
func TestGainKeyOrdersAsTuple(t *testing.T) {
	var carried uint128
	carried.add(math.MaxUint64)
	carried.add(2)
	if carried != (uint128{1, 1}) {
		t.Fatalf("MaxUint64 + 2 = %+v, want {1 1}", carried)
	}
	ordered := []struct {
		g         gainSum
		scheduled bool
		missed    uint64
	}{
		{gainSum{messages: 1, versions: uint128{0, math.MaxUint64}}, false, 0},
		{gainSum{messages: 1, versions: carried}, false, 0},
		{gainSum{messages: 1, versions: carried, prevAts: 5}, false, 0},
		{gainSum{messages: 1, versions: carried, prevAts: 5, prevVersions: uint128{0, 1}}, false, 0},
		{gainSum{messages: 1, versions: carried, prevAts: 5, prevVersions: uint128{0, 1}}, true, 0},
		{gainSum{messages: 1, versions: carried, prevAts: 5, prevVersions: uint128{0, 1}}, true, 3},
		{gainSum{messages: 2}, false, 0},
		{gainSum{messages: math.MaxUint64}, false, 0},
	}
	var prev string
	for i, o := range ordered {
		k := o.g.key(o.scheduled, o.missed)
		if len(k) != len(gainKeyFormat)+keyLen() {
			t.Fatalf("key %d is %d characters, want %d", i, len(k), len(gainKeyFormat)+keyLen())
		}
		if i > 0 && k <= prev {
			t.Errorf("key %d does not sort after key %d:\n%s\n%s", i, i-1, k, prev)
		}
		prev = k
	}
	sum := make([]*big.Int, len(gainKeyWidths))
	for i := range sum {
		sum[i] = new(big.Int)
	}
	for range 2 {
		if err := addKey(sum, ordered[5].g.key(true, 3)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, x := range sum {
		got = append(got, x.String())
	}
	if want := "2 2 2 10 0 2 2 6"; strings.Join(got, " ") != want {
		t.Errorf("two keys summed: %s, want %s", strings.Join(got, " "), want)
	}
	if err := addKey(sum, "123"); err == nil {
		t.Error("a short key was added")
	}
	// A key of release 0.3.0's form, without the format, adds the same
	// components, and ranks below this release's key of the same rows.
	old := strings.TrimPrefix(ordered[5].g.key(true, 3), gainKeyFormat)
	if err := addKey(sum, old); err != nil {
		t.Fatal(err)
	}
	if got := sum[len(sum)-1].String(); got != "9" {
		t.Errorf("missed ticks summed over three keys, one of 0.3.0's form: %s, want 9", got)
	}
	if old >= ordered[0].g.key(false, 0) {
		t.Error("a key of release 0.3.0's form ranks above this release's lowest key")
	}
}
