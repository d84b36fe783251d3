package historytest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/sinktest"
)

// bruteGains computes the rows of project_read_gains and
// project_read_daily_gains from the whole snapshot table, in Go, the
// simplest way: each message's newest write at each snapshot, minus its
// newest write at its previous snapshot (0 for a new message), summed per
// project and snapshot; the interval's missed ticks are the ticks of
// schedule that sync_runs records strictly between the latest previous
// snapshot of the snapshot's messages and the snapshot. With schedule
// empty, no tick counts.
func bruteGains(t *testing.T, db *sinktest.DB, schedule string) (snapshots, days []string) {
	t.Helper()
	type key struct{ p, m int64 }
	type row struct {
		at      uint32
		version uint64
		reads   uint64
	}
	newest := map[key]map[uint32]row{}
	for _, line := range sinktest.Lines(t, db.Conn, "SELECT concat(toString(project_id), ' ', toString(message_id), ' ', toString(toUInt32(snapshot_at)), ' ', toString(version), ' ', toString(read_count)) FROM "+db.Table("message_read_snapshots")) {
		var (
			k key
			r row
		)
		if _, err := fmt.Sscan(line, &k.p, &k.m, &r.at, &r.version, &r.reads); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if newest[k] == nil {
			newest[k] = map[uint32]row{}
		}
		if old, ok := newest[k][r.at]; !ok || r.version > old.version {
			newest[k][r.at] = r
		}
	}
	var ticks []uint32
	if schedule != "" {
		for _, line := range sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT DISTINCT toString(toUInt32(snapshot_at)) FROM %s WHERE trigger = 'cron' AND schedule = '%s'", db.Table("sync_runs"), schedule)) {
			var at uint32
			fmt.Sscan(line, &at)
			ticks = append(ticks, at)
		}
	}
	type snap struct {
		p  int64
		at uint32
	}
	type sum struct {
		messages, newMessages, reads uint64
		prevAt                       uint32
	}
	sums := map[snap]*sum{}
	for k, rows := range newest {
		var prev *row
		for _, at := range slices.Sorted(maps.Keys(rows)) {
			r := rows[at]
			s := sums[snap{k.p, at}]
			if s == nil {
				s = &sum{}
				sums[snap{k.p, at}] = s
			}
			s.messages++
			s.reads += r.reads
			if prev == nil {
				s.newMessages++
			} else {
				s.reads -= prev.reads
				s.prevAt = max(s.prevAt, prev.at)
			}
			prev = &r
		}
	}
	type day struct {
		p int64
		d string
	}
	daySums := map[day]*struct{ snapshots, newMessages, reads, missed uint64 }{}
	keys := slices.SortedFunc(maps.Keys(sums), func(a, b snap) int { return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.at, b.at)) })
	for _, k := range keys {
		s := sums[k]
		var missed uint64
		if s.prevAt > 0 {
			for _, tick := range ticks {
				if tick > s.prevAt && tick < k.at {
					missed++
				}
			}
		}
		snapshots = append(snapshots, fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%d\t%d", k.p, k.at, s.prevAt, s.messages, s.newMessages, int64(s.reads), missed))
		d := day{k.p, time.Unix(int64(k.at), 0).UTC().Format(time.DateOnly)}
		ds := daySums[d]
		if ds == nil {
			ds = &struct{ snapshots, newMessages, reads, missed uint64 }{}
			daySums[d] = ds
		}
		ds.snapshots++
		ds.newMessages += s.newMessages
		ds.reads += s.reads
		ds.missed += missed
	}
	for _, d := range slices.SortedFunc(maps.Keys(daySums), func(a, b day) int { return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.d, b.d)) }) {
		ds := daySums[d]
		days = append(days, fmt.Sprintf("%d\t%s\t%d\t%d\t%d\t%d", d.p, d.d, ds.snapshots, ds.newMessages, int64(ds.reads), ds.missed))
	}
	return snapshots, days
}

// gainsViewRows returns the rows of the two gains views in bruteGains'
// form, filtered by where.
func gainsViewRows(t *testing.T, db *sinktest.DB, where string, pushDown bool) (snapshots, days []string) {
	t.Helper()
	settings := ""
	if pushDown {
		settings = " SETTINGS enable_optimize_predicate_expression = 1"
	}
	snapshots = sinktest.Lines(t, db.Conn, fmt.Sprintf(`SELECT arrayStringConcat([toString(project_id), toString(toUInt32(snapshot_at)),
    toString(ifNull(toUInt32(prev_snapshot_at), 0)), toString(messages), toString(new_messages), toString(reads_gained), toString(missed_ticks)], '\t')
FROM %s %s ORDER BY project_id, snapshot_at%s`, db.Table("project_read_gains"), where, settings))
	days = sinktest.Lines(t, db.Conn, fmt.Sprintf(`SELECT arrayStringConcat([toString(project_id), toString(day), toString(snapshots),
    toString(new_messages), toString(reads_gained), toString(missed_ticks)], '\t')
FROM %s %s ORDER BY project_id, day%s`, db.Table("project_read_daily_gains"), where, settings))
	return snapshots, days
}

// AssertGainsEqualBruteForce compares both gains views with bruteGains,
// whole and filtered to one project, with and without the filter pushed
// down.
func AssertGainsEqualBruteForce(t *testing.T, db *sinktest.DB, schedule string, project int64) {
	t.Helper()
	wantSnaps, wantDays := bruteGains(t, db, schedule)
	if len(wantSnaps) == 0 {
		t.Fatal("the brute force has no rows: the fixture is wrong")
	}
	for _, f := range []struct {
		where    string
		pushDown bool
	}{
		{"", false},
		{fmt.Sprintf("WHERE project_id = %d", project), true},
		{fmt.Sprintf("WHERE project_id = %d", project), false},
	} {
		gotSnaps, gotDays := gainsViewRows(t, db, f.where, f.pushDown)
		ws, wd := wantSnaps, wantDays
		if f.where != "" {
			ws, wd = ofProject(ws, project), ofProject(wd, project)
		}
		if strings.Join(gotSnaps, "\n") != strings.Join(ws, "\n") {
			t.Errorf("project_read_gains %s (push down %v) differs from the brute force:\n%s", f.where, f.pushDown, DiffLines(gotSnaps, ws))
		}
		if strings.Join(gotDays, "\n") != strings.Join(wd, "\n") {
			t.Errorf("project_read_daily_gains %s (push down %v) differs from the brute force:\n%s", f.where, f.pushDown, DiffLines(gotDays, wd))
		}
	}
}

// ofProject keeps the lines of project p.
func ofProject(lines []string, p int64) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, fmt.Sprintf("%d\t", p)) {
			out = append(out, l)
		}
	}
	return out
}
