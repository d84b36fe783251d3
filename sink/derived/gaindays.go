package derived

import (
	"context"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// The day gains rollup holds, once merged, one row per project and UTC
// day: the gains of the day's snapshots summed, what
// project_read_daily_gains shows. Summing the gains rollup per day at
// query time would cost every snapshot of the range (a dashboard's 30 days
// of 500 projects' hourly snapshots took 250 ms); this costs a row per
// project and day. readsync refreshes a day after every refresh of gains
// at its snapshots, from the gains rollup.
//
// Each refresh stores the day's values with a key that grows with the
// rows it saw, as the other refreshed rollups do: the number of the day's
// snapshots, then the sums, component by component, of the keys of their
// gains. Each snapshot's key only grows with more rows seen (gains.go), and
// a sum of tuples that each grew or stayed, component by component without
// carries, is itself a tuple that grew or stayed: at the first component
// where any of them changed, all that changed there grew.

// gainKeyWidths are the widths of the components of a gains key after its
// format (see gainSum.key); keys of release 0.3.0 have no format and the
// same components.
var gainKeyWidths = []int{20, 20, 20, 20, 20, 20, 1, 20}

// refreshGainDays recomputes the day gains rollup and the hour gains
// rollup (the same sums per UTC hour) for the days and hours of the
// snapshots of set, from the gains rollup, which it reads once for both:
// the days' rows hold the hours'. For each project of newest whose newest
// snapshot's day it sums, it sums that snapshot's hour too, and returns
// the project's tip there.
func (h *History) refreshGainDays(ctx context.Context, set chconn.SnapshotSet, newest map[int64]uint32) (map[int64]tip, error) {
	keys := map[chconn.Period]map[chconn.ProjectDay]bool{}
	for _, p := range h.gainPeriods {
		keys[p] = set.Periods(p)
	}
	days := keys[chconn.Day]
	if len(days) == 0 {
		return nil, nil
	}
	hours, tipped := keys[chconn.Hour]
	for p, at := range newest {
		if tipped && days[chconn.ProjectDay{Project: p, Day: chconn.Day.Of(at)}] {
			hours[chconn.ProjectDay{Project: p, Day: chconn.Hour.Of(at)}] = true
		}
	}
	sums, err := h.sumGainDays(ctx, days, keys)
	if err != nil {
		return nil, h.conn.Redact(fmt.Errorf("refresh %d project days of %s: %w", len(days), schema.DayGainsRollup, err))
	}
	for _, p := range h.gainPeriods {
		if len(sums[p]) == 0 {
			continue
		}
		if err := h.writeGainDays(ctx, p, sums[p]); err != nil {
			return nil, err
		}
	}
	tips := map[int64]tip{}
	for p, at := range newest {
		day, hour := sums[chconn.Day][chconn.ProjectDay{Project: p, Day: chconn.Day.Of(at)}], sums[chconn.Hour][chconn.ProjectDay{Project: p, Day: chconn.Hour.Of(at)}]
		if day != nil && hour != nil {
			tips[p] = tip{at: at, day: *day, hour: *hour}
		}
	}
	return tips, nil
}

// daySum is one project day's gains, summed over its snapshots, with the
// sum of their keys.
type daySum struct {
	snapshots, newMessages, missed uint64
	reads                          int64
	key                            []*big.Int
}

// gainRollup is the rollup of the gains summed per period p.
func gainRollup(p chconn.Period) string {
	if p == chconn.Day {
		return schema.DayGainsRollup
	}
	return schema.HourGainsRollup
}

// sumGainDays reads the gains rollup's rows of the project days of days
// and sums each period's snapshots, for the periods of keys and their
// project periods: the hours of keys lie in its days.
func (h *History) sumGainDays(ctx context.Context, days map[chconn.ProjectDay]bool, keys map[chconn.Period]map[chconn.ProjectDay]bool) (map[chconn.Period]map[chconn.ProjectDay]*daySum, error) {
	projects, lo, hi := daySpan(days)
	pt, err := chconn.ProjectsExt("day_projects", projects)
	if err != nil {
		return nil, err
	}
	// The projects and the span of days narrow the read; the periods not
	// asked for that fall in it are skipped below.
	q := fmt.Sprintf(`SELECT project_id, toUInt32(snapshot_at), argMax(gain_new_messages, gain_key),
    argMax(gain_reads, gain_key), argMax(gain_missed_ticks, gain_key), max(gain_key)
FROM %s
WHERE %s AND snapshot_at >= %s AND snapshot_at < %s
GROUP BY project_id, snapshot_at`, h.names.Table(schema.GainsRollup), h.names.InExt("project_id", "day_projects"),
		chconn.DateTime(chconn.Day.Start(lo)), chconn.DateTime(chconn.Day.Start(hi+1)))
	sums := map[chconn.Period]map[chconn.ProjectDay]*daySum{}
	for p := range keys {
		sums[p] = map[chconn.ProjectDay]*daySum{}
	}
	err = chconn.QueryEach(chconn.WithExternal(ctx, pt), h.conn, q, func(rows driver.Rows) error {
		var (
			project     int64
			at          uint32
			newMessages uint64
			reads       int64
			missed      uint64
			key         string
		)
		if err := rows.Scan(&project, &at, &newMessages, &reads, &missed, &key); err != nil {
			return err
		}
		for p, want := range keys {
			pd := chconn.ProjectDay{Project: project, Day: p.Of(at)}
			if !want[pd] {
				continue
			}
			s := sums[p][pd]
			if s == nil {
				s = newDaySum()
				sums[p][pd] = s
			}
			s.snapshots++
			s.newMessages += newMessages
			s.reads += reads
			s.missed += missed
			if err := addKey(s.key, key); err != nil {
				return fmt.Errorf("project %d: %w", project, err)
			}
		}
		return nil
	})
	return sums, err
}

// writeGainDays writes the sums of the periods p into their gains
// rollup.
func (h *History) writeGainDays(ctx context.Context, p chconn.Period, sums map[chconn.ProjectDay]*daySum) error {
	// The values go as external data, a table sent with the INSERT:
	// as literals in its text, 18.16 took half a second to parse a pass's
	// worth.
	rollup, col := gainRollup(p), p.Column()
	input, err := chconn.NewExtTable("day_gains", "project_id", "Int64", col, p.Type(), "snapshots", "UInt64",
		"new_messages", "UInt64", "reads_gained", "Int64", "missed_ticks", "UInt64", "day_key", "String")
	if err != nil {
		return fmt.Errorf("refresh %s: %w", rollup, err)
	}
	for _, pd := range slices.SortedFunc(maps.Keys(sums), chconn.ProjectDay.Compare) {
		s := sums[pd]
		if err := input.Append(pd.Project, sink.Time(p.Start(pd.Day)).Time(), s.snapshots, s.newMessages, s.reads, s.missed, dayGainKey(s.snapshots, s.key)); err != nil {
			return fmt.Errorf("refresh %s: %w", rollup, err)
		}
	}
	q := strings.ReplaceAll(fmt.Sprintf(`INSERT INTO %s (project_id, {period}, {period}_gain_state)
SELECT project_id, {period}, argMaxState((snapshots, new_messages, reads_gained, missed_ticks), day_key)
FROM day_gains
GROUP BY project_id, {period}`, h.names.Table(rollup)), "{period}", col)
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), input), q); err != nil {
		return h.conn.Redact(fmt.Errorf("refresh %d project %ss of %s: %w", len(sums), col, rollup, err))
	}
	return nil
}

// dayGainKey is a day's key: the format of this release's keys, which
// ranks it above any day key of release 0.3.0, then the number of the
// day's snapshots and the sums of their keys' components. A component
// summed over at most a day's snapshots fits 45 digits: 20-digit
// components, and far fewer than 10^25 snapshots a day.
func dayGainKey(snapshots uint64, sums []*big.Int) string {
	var key strings.Builder
	fmt.Fprintf(&key, "%s%020d", gainKeyFormat, snapshots)
	for _, k := range sums {
		fmt.Fprintf(&key, "%045s", k.String())
	}
	return key.String()
}

// addKey adds the components of the gains key key to sum: a key of this
// release's form, or of release 0.3.0's, whose rows an older process may
// still write while a new one takes over.
func addKey(sum []*big.Int, key string) error {
	pos := 0
	switch {
	case len(key) == len(gainKeyFormat)+keyLen() && strings.HasPrefix(key, gainKeyFormat):
		pos = len(gainKeyFormat)
	case len(key) == keyLen():
	default:
		return fmt.Errorf("gains key %q: %d characters, want %d", key, len(key), len(gainKeyFormat)+keyLen())
	}
	for i, w := range gainKeyWidths {
		var x big.Int
		if _, ok := x.SetString(key[pos:pos+w], 10); !ok {
			return fmt.Errorf("gains key %q: component %d is not a number", key, i+1)
		}
		sum[i].Add(sum[i], &x)
		pos += w
	}
	return nil
}

func keyLen() int {
	n := 0
	for _, w := range gainKeyWidths {
		n += w
	}
	return n
}
