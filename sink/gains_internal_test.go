package sink

import (
	"math"
	"math/big"
	"strings"
	"testing"
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
	tests := []struct {
		name    string
		targets map[int64]map[uint32]bool
		all     bool
		priors  map[msgKey]snapRow
		rows    []in
		want    map[gainTarget]gainSum
	}{
		{
			name:    "new message counts from zero",
			targets: map[int64]map[uint32]bool{1: {100: true}},
			rows:    []in{{1, 1, 100, 5, 7}},
			want:    map[gainTarget]gainSum{{1, 100}: {messages: 1, newMessages: 1, reads: 7, versions: uint128{0, 5}}},
		},
		{
			name:    "the newest version of a snapshot counts, against the previous snapshot's newest",
			targets: map[int64]map[uint32]bool{1: {200: true}},
			rows:    []in{{1, 1, 100, 5, 7}, {1, 1, 100, 6, 9}, {1, 1, 200, 8, 10}, {1, 1, 200, 9, 12}},
			want:    map[gainTarget]gainSum{{1, 200}: {messages: 1, reads: 3, prevAt: 100, versions: uint128{0, 9}, prevAts: 100, prevVersions: uint128{0, 6}}},
		},
		{
			name:    "a prior row is the previous one of the first row read",
			targets: map[int64]map[uint32]bool{1: {200: true}},
			priors:  map[msgKey]snapRow{{1, 1}: {at: 50, version: 3, reads: 4}},
			rows:    []in{{1, 1, 200, 8, 10}, {1, 2, 200, 8, 1}},
			want: map[gainTarget]gainSum{{1, 200}: {messages: 2, newMessages: 1, reads: 7, prevAt: 50, versions: uint128{0, 16},
				prevAts: 50, prevVersions: uint128{0, 3}}},
		},
		{
			name: "every snapshot of every project with all",
			all:  true,
			rows: []in{{1, 1, 100, 1, 2}, {1, 1, 200, 2, 5}, {2, 1, 100, 1, 1}},
			want: map[gainTarget]gainSum{
				{1, 100}: {messages: 1, newMessages: 1, reads: 2, versions: uint128{0, 1}},
				{1, 200}: {messages: 1, reads: 3, prevAt: 100, versions: uint128{0, 2}, prevAts: 100, prevVersions: uint128{0, 1}},
				{2, 100}: {messages: 1, newMessages: 1, reads: 1, versions: uint128{0, 1}},
			},
		},
		{
			name:    "a lower count is a negative gain",
			targets: map[int64]map[uint32]bool{1: {200: true}},
			rows:    []in{{1, 1, 100, 1, 9}, {1, 1, 200, 2, 4}},
			want:    map[gainTarget]gainSum{{1, 200}: {messages: 1, reads: minusFive, prevAt: 100, versions: uint128{0, 2}, prevAts: 100, prevVersions: uint128{0, 1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newGainScan(tt.targets, tt.all)
			for k, r := range tt.priors {
				s.priors[k] = r
			}
			for _, r := range tt.rows {
				s.row(msgKey{r.p, r.m}, snapRow{r.at, r.version, r.reads})
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
		if len(k) != keyLen() {
			t.Fatalf("key %d is %d characters, want %d", i, len(k), keyLen())
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
}
