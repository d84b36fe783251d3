package sink

import (
	"context"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
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
var dayGainsTable = tableDef{name: dayGainsRollup, columns: []columnDef{
	{"project_id", "Int64"}, {"day", "Date"},
	{"day_gain_state", "AggregateFunction(argMax, Tuple(UInt64, UInt64, Int64, UInt64), String)"},
}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "toYYYYMM(day)", "(project_id, day)")}

const dayGainsRollup = "project_read_day_gain_rollup"

// gainKeyWidths are the widths of the components of a gains key (see
// gainSum.key).
var gainKeyWidths = []int{20, 20, 20, 20, 20, 20, 1, 20}

// refreshGainDays recomputes the day gains rollup for days from the gains
// rollup.
func (c *ClickHouse) refreshGainDays(ctx context.Context, days map[projectDay]bool) error {
	if len(days) == 0 {
		return nil
	}
	projects := map[int64]bool{}
	lo, hi := ^uint32(0), uint32(0)
	for pd := range days {
		projects[pd.project] = true
		lo, hi = min(lo, pd.day), max(hi, pd.day)
	}
	// The projects and the span of days narrow the read; the days not
	// asked for that fall in it are skipped below. (Naming each project
	// day would make the fold's query longer than the server takes.)
	q := fmt.Sprintf(`SELECT project_id, toUInt32(toDate(snapshot_at, 'UTC')) AS day, argMax(gain_new_messages, gain_key),
    argMax(gain_reads, gain_key), argMax(gain_missed_ticks, gain_key), max(gain_key)
FROM %s
WHERE project_id IN (%s) AND snapshot_at >= toDateTime(%d) AND snapshot_at < toDateTime(%d)
GROUP BY project_id, snapshot_at`, c.ddl.table(gainsRollup), joinInts(slices.Sorted(maps.Keys(projects))), lo*86400, (hi+1)*86400)
	rows, err := c.conn.Query(ctx, q)
	if err != nil {
		return c.redact(fmt.Errorf("refresh %d project days of %s: %w", len(days), dayGainsRollup, err))
	}
	type daySum struct {
		snapshots, newMessages, missed uint64
		reads                          int64
		key                            []*big.Int
	}
	sums := map[projectDay]*daySum{}
	for rows.Next() {
		var (
			pd          projectDay
			newMessages uint64
			reads       int64
			missed      uint64
			key         string
		)
		if err := rows.Scan(&pd.project, &pd.day, &newMessages, &reads, &missed, &key); err != nil {
			rows.Close()
			return c.redact(fmt.Errorf("refresh %s: %w", dayGainsRollup, err))
		}
		if !days[pd] {
			continue
		}
		s := sums[pd]
		if s == nil {
			s = &daySum{}
			for range gainKeyWidths {
				s.key = append(s.key, new(big.Int))
			}
			sums[pd] = s
		}
		s.snapshots++
		s.newMessages += newMessages
		s.reads += reads
		s.missed += missed
		if err := addKey(s.key, key); err != nil {
			rows.Close()
			return fmt.Errorf("refresh %s: project %d: %w", dayGainsRollup, pd.project, err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return c.redact(fmt.Errorf("refresh %s: %w", dayGainsRollup, err))
	}
	// The values go as external data, a table sent with the INSERT:
	// as literals in its text, 18.16 took half a second to parse a pass's
	// worth.
	input, err := ext.NewTable("day_gains", ext.Column("project_id", "Int64"), ext.Column("day", "Date"), ext.Column("snapshots", "UInt64"),
		ext.Column("new_messages", "UInt64"), ext.Column("reads_gained", "Int64"), ext.Column("missed_ticks", "UInt64"), ext.Column("day_key", "String"))
	if err != nil {
		return fmt.Errorf("refresh %s: %w", dayGainsRollup, err)
	}
	for _, pd := range slices.SortedFunc(maps.Keys(sums), projectDay.compare) {
		s := sums[pd]
		var key strings.Builder
		fmt.Fprintf(&key, "%020d", s.snapshots)
		for _, k := range s.key {
			// A component summed over at most a day's snapshots fits
			// 45 digits: 20-digit components, and far fewer than 10^25
			// snapshots a day.
			fmt.Fprintf(&key, "%045s", k.String())
		}
		if err := input.Append(pd.project, Time(pd.day*86400).Time(), s.snapshots, s.newMessages, s.reads, s.missed, key.String()); err != nil {
			return fmt.Errorf("refresh %s: %w", dayGainsRollup, err)
		}
	}
	q = fmt.Sprintf(`INSERT INTO %s (project_id, day, day_gain_state)
SELECT project_id, day, argMaxState((snapshots, new_messages, reads_gained, missed_ticks), day_key)
FROM day_gains
GROUP BY project_id, day`, c.ddl.table(dayGainsRollup))
	if err := c.conn.Exec(clickhouse.Context(c.syncInserts(ctx), clickhouse.WithExternalTable(input)), q); err != nil {
		return c.redact(fmt.Errorf("refresh %d project days of %s: %w", len(sums), dayGainsRollup, err))
	}
	return nil
}

// addKey adds the components of the gains key key to sum.
func addKey(sum []*big.Int, key string) error {
	pos := 0
	for i, w := range gainKeyWidths {
		if pos+w > len(key) {
			return fmt.Errorf("gains key %q: %d characters, want %d", key, len(key), keyLen())
		}
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
