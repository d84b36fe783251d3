package derived

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/readsync/readsync/sink/schema"
)

// speedOfCurve is a message's speed row computed from its whole curve, as
// package schema's speedValues computes it in SQL: the brute force that
// carrySpeed must equal. rows are every snapshot row of the message, in
// any order.
func speedOfCurve(rows []agedRow) schema.SpeedRow {
	type bucket struct {
		age  uint32
		last agedRow
	}
	var buckets []bucket
	created, first := rows[0].created, rows[0].at
	for _, w := range rows {
		first = min(first, w.at)
		b := schema.AgeBucket(w.created, w.at)
		i := slices.IndexFunc(buckets, func(x bucket) bool { return x.age == b })
		switch {
		case i < 0:
			buckets = append(buckets, bucket{b, w})
		case w.compare(buckets[i].last) > 0:
			buckets[i].last = w
		}
	}
	slices.SortFunc(buckets, func(a, b bucket) int { return int(a.age) - int(b.age) })
	n := len(buckets)
	r := schema.SpeedRow{ProjectID: rows[0].project, MessageID: rows[0].message, CreateAt: created,
		FirstAge: buckets[0].age, LatestAge: buckets[n-1].age, LatestAt: buckets[n-1].last.at, LatestVersion: buckets[n-1].last.version,
		LatestReads: buckets[n-1].last.reads}
	if first > created {
		r.FirstSeenAgeHours = (first - created) / 3600
	}
	for _, b := range buckets {
		r.Version = max(r.Version, b.last.version)
	}
	for i, h := range schema.SpeedAges {
		if buckets[0].age <= h && buckets[n-1].age >= h {
			j := 0
			for j+1 < n && buckets[j+1].age <= h {
				j++
			}
			r.ReadsAt[i] = ptr(buckets[j].last.reads)
		}
	}
	if r.LatestReads > 0 && r.ReadsAt[2] != nil {
		r.Share24h = ptr(float64(*r.ReadsAt[2]) / float64(r.LatestReads))
	}
	for s := range r.Shares {
		bound := schema.SpeedShareBound(s, r.LatestReads)
		idx := slices.IndexFunc(buckets, func(b bucket) bool { return b.last.reads >= bound })
		sh := &r.Shares[s]
		sh.Age, sh.Reads = buckets[idx].age, buckets[idx].last.reads
		for _, b := range buckets[idx+1 : max(idx+1, n-1)] {
			sh.Between = max(sh.Between, b.last.reads)
		}
		if r.LatestReads > 0 {
			sh.AfterMax = ptr(sh.Age)
			if idx > 0 {
				sh.AfterMin = ptr(schema.GridBefore(sh.Age))
			}
		}
	}
	return r
}

// snap is a snapshot row of message 1 of project 1, created at 0, taken
// at age minutes with reads.
func snap(minutes int, reads uint64) agedRow {
	const created = 1_800_000_000
	return agedRow{project: 1, message: 1, created: created, at: uint32(created + minutes*60), version: uint64(minutes + 100), reads: reads}
}

// showSpeed prints a speed row with its NULLs and values.
func showSpeed(r schema.SpeedRow) string {
	v := func(p any) string {
		switch x := p.(type) {
		case *uint64:
			if x != nil {
				return fmt.Sprint(*x)
			}
		case *uint32:
			if x != nil {
				return fmt.Sprint(*x)
			}
		case *float64:
			if x != nil {
				return fmt.Sprint(*x)
			}
		}
		return "NULL"
	}
	out := fmt.Sprintf("created %d first seen %d reads at %s/%s/%s/%s/%s latest %d share %s version %d ages %d-%d latest at %d v%d",
		r.CreateAt, r.FirstSeenAgeHours, v(r.ReadsAt[0]), v(r.ReadsAt[1]), v(r.ReadsAt[2]), v(r.ReadsAt[3]), v(r.ReadsAt[4]),
		r.LatestReads, v(r.Share24h), r.Version, r.FirstAge, r.LatestAge, r.LatestAt, r.LatestVersion)
	for _, sh := range r.Shares {
		out += fmt.Sprintf("; after %s-%s at %d (%d reads, %d between)", v(sh.AfterMin), v(sh.AfterMax), sh.Age, sh.Reads, sh.Between)
	}
	return out
}

// The rules of carrying a speed row forward: where the row decides the
// next, the next is the brute force's over the whole curve; where it
// cannot, carrySpeed says so.
func TestCarrySpeed(t *testing.T) {
	h := 60 // minutes
	for _, c := range []struct {
		name          string
		before, write []agedRow
		carried       bool
	}{
		{"more reads in the latest bucket", []agedRow{snap(10, 1), snap(70, 4)}, []agedRow{snap(100, 9)}, true},
		{"a new bucket", []agedRow{snap(10, 1), snap(70, 4)}, []agedRow{snap(130, 9)}, true},
		{"a new bucket past fixed ages (6 h, 24 h)", []agedRow{snap(10, 1), snap(5*h-1, 4)}, []agedRow{snap(30*h, 9)}, true},
		{"several buckets in one write", []agedRow{snap(10, 1)}, []agedRow{snap(2*h, 3), snap(3*h, 3), snap(7*h, 20), snap(100*h, 21)}, true},
		{"the share moves to the latest bucket", []agedRow{snap(10, 1), snap(2*h, 2), snap(3*h, 10)}, []agedRow{snap(4*h, 30)}, true},
		{"the share moves to the bucket before the latest", []agedRow{snap(10, 1), snap(2*h, 2), snap(3*h, 10)}, []agedRow{snap(4*h, 19)}, true},
		{"the share stays", []agedRow{snap(10, 6), snap(2*h, 8), snap(3*h, 10)}, []agedRow{snap(4*h, 11)}, true},
		{"the share moves to a bucket between", []agedRow{snap(10, 1), snap(2*h, 6), snap(3*h, 8), snap(4*h, 10)}, []agedRow{snap(5*h, 14)}, false},
		{"nothing read yet, then reads", []agedRow{snap(10, 0), snap(2*h, 0)}, []agedRow{snap(3*h, 5)}, true},
		{"reads that fell to none, then more", []agedRow{snap(10, 5), snap(2*h, 0)}, []agedRow{snap(3*h, 8)}, true},
		{"reads that fell to none, then more than before", []agedRow{snap(10, 5), snap(2*h, 0)}, []agedRow{snap(3*h, 12)}, true},
		{"a fall that keeps both bounds", []agedRow{snap(10, 1), snap(2*h, 10)}, []agedRow{snap(2*h+5, 9)}, true},
		{"a fall that lowers a bound", []agedRow{snap(10, 1), snap(2*h, 10)}, []agedRow{snap(3*h, 7)}, false},
		{"a snapshot older than the latest", []agedRow{snap(10, 1), snap(3*h, 10)}, []agedRow{snap(2*h, 5)}, false},
		{"the latest snapshot again", []agedRow{snap(10, 1), snap(3*h, 10)}, []agedRow{snap(3*h, 10)}, true},
		{"the latest snapshot again with other reads", []agedRow{snap(10, 1), snap(3*h, 10)}, []agedRow{snap(3*h, 11)}, false},
		{"first seen late", []agedRow{snap(95*h+40, 80)}, []agedRow{snap(119*h+40, 80), snap(200*h, 90)}, true},
		{"first seen late, half in the first bucket", []agedRow{snap(30*h, 50)}, []agedRow{snap(31*h, 60)}, true},
		{"a created before its snapshots", []agedRow{snap(-5, 3)}, []agedRow{snap(30, 4)}, true},
		{"daily buckets", []agedRow{snap(10, 1), snap(80*h, 100)}, []agedRow{snap(97*h, 150), snap(150*h, 151)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			prev := speedOfCurve(c.before)
			got, ok := carrySpeed(prev, c.write)
			if ok != c.carried {
				t.Fatalf("carried %v, want %v", ok, c.carried)
			}
			if want := speedOfCurve(append(slices.Clone(c.before), c.write...)); ok && !reflect.DeepEqual(got, want) {
				t.Errorf("carried\n %s\nwant\n %s", showSpeed(got), showSpeed(want))
			}
		})
	}
	t.Run("create_at changed", func(t *testing.T) {
		before := []agedRow{snap(10, 1), snap(70, 4)}
		w := snap(130, 9)
		w.created -= 3600
		if _, ok := carrySpeed(speedOfCurve(before), []agedRow{w}); ok {
			t.Error("carried over a create_at that changed")
		}
	})
	t.Run("a lower version replaces the row of the highest", func(t *testing.T) {
		before := []agedRow{snap(10, 1), snap(70, 4)}
		w := snap(80, 9)
		w.version = 1
		if _, ok := carrySpeed(speedOfCurve(before), []agedRow{w}); ok {
			t.Error("carried a version that may have fallen")
		}
	})
}

// Random curves, cut at random: the row of the first part carried over
// the rest is the whole curve's, or carrySpeed gives up. Over curves that
// only grow, written a snapshot at a time as passes write them, it gives
// up seldom.
func TestCarrySpeedRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 17))
	carried, steady, steadyCarried, firsts := 0, 0, 0, 0
	for range 20000 {
		var rows []agedRow
		reads, minute := uint64(rng.IntN(3)), rng.IntN(3*60)-30
		grows := rng.IntN(2) == 0
		for range 1 + rng.IntN(40) {
			minute += 1 + rng.IntN([]int{30, 60, 600, 3000}[rng.IntN(4)])
			switch k := rng.IntN(10); {
			case k < 5:
				reads += uint64(rng.IntN(5))
			case k < 7:
				reads += uint64(rng.IntN(200))
			case k < 8 && !grows && reads > 0:
				reads -= uint64(rng.IntN(int(min(reads, 20))))
			}
			rows = append(rows, snap(minute, reads))
		}
		cut := 1 + rng.IntN(len(rows))
		before, write := rows[:cut], rows[cut:]
		if grows && len(write) > 1 {
			rows, write = rows[:cut+1], write[:1]
		}
		if !grows && rng.IntN(4) == 0 && len(write) > 0 {
			// Out of order: the write holds a snapshot the row saw.
			write = append([]agedRow{before[rng.IntN(len(before))]}, write...)
		}
		sortAged(write)
		// The whole curve written at once, as a message's first write (a
		// backfill's) holds it.
		whole := slices.Clone(rows)
		sortAged(whole)
		if got, ok := firstSpeed(whole); ok {
			firsts++
			if want := speedOfCurve(whole); !reflect.DeepEqual(got, want) {
				t.Fatalf("curve %v written at once: computed\n %s\nwant\n %s", whole, showSpeed(got), showSpeed(want))
			}
		}
		got, ok := carrySpeed(speedOfCurve(before), write)
		if grows {
			steady++
		}
		if !ok {
			continue
		}
		carried++
		if grows {
			steadyCarried++
		}
		if want := speedOfCurve(rows); !reflect.DeepEqual(got, want) {
			t.Fatalf("curve %v cut at %d: carried\n %s\nwant\n %s", rows, cut, showSpeed(got), showSpeed(want))
		}
	}
	t.Logf("carried %d of 20000 writes; %d of the %d of a snapshot a message over curves that only grow", carried, steadyCarried, steady)
	t.Logf("computed %d of the 20000 curves written at once", firsts)
	if firsts == 0 {
		t.Error("computed no curve written at once")
	}
	if steadyCarried*10 < steady*9 {
		t.Errorf("carried %d of %d writes of a snapshot over curves that only grow, want nine in ten", steadyCarried, steady)
	}
}
