package verify

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// The brute force of the views on the message's clock (package schema's
// age.go): each message's curve worked out from its snapshot rows and
// its create_at, the simplest way. A curve depends on every snapshot
// since the message's creation, so a window judges the messages created
// from its day on (every message over the whole history), reading their
// projects' rows from ageSlack before the day, for snapshots stamped
// before their message's create_at; project_read_by_age is judged for the
// projects all of whose messages are.

// ageSlack is how long before a window's day the brute force of the
// curves reads a project's snapshot rows.
const ageSlack = 7 * 86400

var (
	colMessage  = viewColumn{"message_id", kindNumber}
	colAge      = viewColumn{"age_hours", kindNumber}
	colCreateAt = viewColumn{"create_at", kindTime}
	colFirst    = viewColumn{"first_seen_age_hours", kindNumber}
)

// ageShapes are the views on the message's clock as Verify compares them,
// in the order of Views. Their rows are judged by message, not by time:
// since is unused.
var ageShapes = []viewShape{
	{name: schema.ByAgeView, key: []viewColumn{colProject, colMessage, colAge},
		values: []viewColumn{colSnapshot, {"reads", kindNumber}, {"total", kindNumber}, {"read_rate", kindFloat}, colCreateAt, colFirst}},
	{name: schema.SpeedView, key: []viewColumn{colProject, colMessage},
		values: []viewColumn{colNFT, colName, {"subject", kindString}, colCreateAt, colFirst,
			{"reads_1h", kindNullNumber}, {"reads_6h", kindNullNumber}, {"reads_24h", kindNullNumber}, {"reads_72h", kindNullNumber},
			{"reads_7d", kindNullNumber}, {"latest_reads", kindNumber}, {"share_24h", kindNullFloat},
			{"half_after_hours_min", kindNullNumber}, {"half_after_hours_max", kindNullNumber},
			{"nine_tenths_after_hours_min", kindNullNumber}, {"nine_tenths_after_hours_max", kindNullNumber}}},
	{name: schema.ProjectByAgeView, key: []viewColumn{colProject, colAge},
		values: []viewColumn{{"messages", kindNumber}, {"reads_median", kindNumber}, {"reads_p10", kindNumber}, {"reads_p90", kindNumber},
			{"read_rate_median", kindFloat}, {"read_rate_p10", kindFloat}, {"read_rate_p90", kindFloat}}},
}

// ageRow is a snapshot row as the brute force of the curves reads it.
type ageRow struct {
	at           uint32
	reads, total uint64
}

// agePoint is a row of a brute-force curve.
type agePoint struct {
	age uint32
	row ageRow
}

// ageStep computes and compares the curves of the step s's messages
// created from from on; names are the step's names (bruteNames), which
// the brute force of the other views read for the same step.
func (c *Checker) ageStep(ctx context.Context, s step, from uint32, names bruteNamesOf, judged *comparison) error {
	filter, ext, err := s.filter(c.names, "project_id")
	if err != nil {
		return err
	}
	ctx = chconn.WithExternal(ctx, ext...)
	created := map[msgKey]uint32{}
	unjudged := map[int64]bool{}
	err = chconn.QueryEach(ctx, c.conn, fmt.Sprintf("SELECT project_id, id, toUInt32(argMax(create_at, version)) FROM %s WHERE %s GROUP BY project_id, id",
		c.names.Table(schema.MessagesTable.Name()), filter), func(rows driver.Rows) error {
		var (
			k  msgKey
			at uint32
		)
		if err := rows.Scan(&k.project, &k.message, &at); err != nil {
			return err
		}
		switch {
		case at == 0: // no usable create_at: no curve
		case at >= from:
			created[k] = at
		default:
			unjudged[k.project] = true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the messages' create_at: %w", err)
	}
	rows := map[msgKey][]ageRow{}
	q := fmt.Sprintf(`SELECT project_id, message_id, toUInt32(snapshot_at), read_count, total
FROM %s
WHERE %s AND snapshot_at >= %s
ORDER BY project_id, message_id, snapshot_at, version`, c.names.Table(schema.SnapshotsTable.Name()), filter, chconn.DateTime(from-min(from, ageSlack)))
	err = chconn.QueryEach(ctx, c.conn, q, func(r driver.Rows) error {
		var (
			k   msgKey
			row ageRow
		)
		if err := r.Scan(&k.project, &k.message, &row.at, &row.reads, &row.total); err != nil {
			return err
		}
		if _, ok := created[k]; !ok {
			return nil
		}
		m := rows[k]
		if n := len(m); n > 0 && m[n-1].at == row.at {
			m[n-1] = row // a newer version of the same snapshot
		} else {
			m = append(m, row)
		}
		rows[k] = m
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the snapshot rows of projects %d to %d: %w", s.lo, s.hi, err)
	}
	want := map[string]viewRows{}
	for _, shape := range ageShapes {
		want[shape.name] = viewRows{}
	}
	byProjectAge := map[[2]int64][]ageRow{}
	for k, m := range rows {
		curve := bruteCurve(created[k], m)
		first := uint32(max(int64(m[0].at)-int64(created[k]), 0) / 3600)
		for _, p := range curve {
			want[schema.ByAgeView][fmt.Sprintf("%d\t%d\t%d", k.project, k.message, p.age)] = strings.Join([]string{
				strconv.FormatUint(uint64(p.row.at), 10), strconv.FormatUint(p.row.reads, 10), strconv.FormatUint(p.row.total, 10),
				floatText(rate(p.row)), strconv.FormatUint(uint64(created[k]), 10), strconv.FormatUint(uint64(first), 10)}, "\t")
			pa := [2]int64{k.project, int64(p.age)}
			byProjectAge[pa] = append(byProjectAge[pa], p.row)
		}
		pn := names.projects[k.project]
		want[schema.SpeedView][fmt.Sprintf("%d\t%d", k.project, k.message)] = strings.Join(append([]string{pn[0], pn[1],
			names.subjects[k], strconv.FormatUint(uint64(created[k]), 10), strconv.FormatUint(uint64(first), 10)}, bruteSpeed(curve)...), "\t")
	}
	for pa, rs := range byProjectAge {
		if unjudged[pa[0]] {
			continue
		}
		want[schema.ProjectByAgeView][fmt.Sprintf("%d\t%d", pa[0], pa[1])] = bruteProjectAge(rs)
	}
	keep := func(cols []string) (bool, error) {
		p, err := strconv.ParseInt(cols[0], 10, 64)
		if err != nil {
			return false, err
		}
		m, err := strconv.ParseInt(cols[1], 10, 64)
		if err != nil {
			return false, err
		}
		_, ok := created[msgKey{p, m}]
		return ok, nil
	}
	keepProject := func(cols []string) (bool, error) {
		p, err := strconv.ParseInt(cols[0], 10, 64)
		return err == nil && !unjudged[p], err
	}
	for _, shape := range ageShapes {
		got := viewRows{}
		k := keep
		if shape.name == schema.ProjectByAgeView {
			k = keepProject
		}
		from, err := c.viewFrom(ctx, judged, shape.name, s)
		if err != nil {
			return err
		}
		if err := c.readViewRows(ctx, shape, from, filter, got, k); err != nil {
			return fmt.Errorf("read %s: %w", shape.name, err)
		}
		judged.add(shape, got, want[shape.name])
	}
	return nil
}

// ageGrid is the age after a, on the grid of the curves: every hour up
// to schema.HourlyAges, every 24 hours after.
func ageGrid(a uint32) uint32 {
	if a < schema.HourlyAges {
		return a + 1
	}
	return a + 24
}

// bruteCurve is the curve of a message created at created with the
// snapshot rows m (in time order): for each age on the grid from the
// first at or after its first snapshot's age to the first at or after its
// last's, the last row taken at or before created + age hours.
func bruteCurve(created uint32, m []ageRow) []agePoint {
	until := func(at uint32) uint32 { // the first age on the grid at or after at's
		a := uint32(0)
		for int64(created)+int64(a)*3600 < int64(at) {
			a = ageGrid(a)
		}
		return a
	}
	var out []agePoint
	last := until(m[len(m)-1].at)
	i := 0 // m[:i] are the rows at or before the age's bound
	for a := until(m[0].at); a <= last; a = ageGrid(a) {
		bound := int64(created) + int64(a)*3600
		for i < len(m) && int64(m[i].at) <= bound {
			i++
		}
		out = append(out, agePoint{a, m[i-1]})
	}
	return out
}

// bruteSpeed is a curve's message_read_speed values from reads_1h on, as
// text.
func bruteSpeed(curve []agePoint) []string {
	at := func(age uint32) (uint64, bool) {
		for _, p := range curve {
			if p.age == age {
				return p.row.reads, true
			}
		}
		return 0, false
	}
	var out []string
	for _, h := range []uint32{1, 6, 24, 72, 168} {
		out = append(out, nullNumber(at(h)))
	}
	latest := curve[len(curve)-1].row.reads
	out = append(out, strconv.FormatUint(latest, 10))
	if r24, ok := at(24); ok && latest > 0 {
		out = append(out, floatText(float64(r24)/float64(latest)))
	} else {
		out = append(out, "NULL")
	}
	for _, reached := range []func(r uint64) bool{
		// At least half and nine tenths, in a form no count near the top
		// of UInt64 overflows: r ≥ ⌈latest × (1 - 1/n)⌉.
		func(r uint64) bool { return r >= latest-latest/2 },
		func(r uint64) bool { return r >= latest-latest/10 },
	} {
		lo, hi := "NULL", "NULL"
		for i, p := range curve {
			if latest > 0 && reached(p.row.reads) {
				hi = strconv.FormatUint(uint64(p.age), 10)
				if i > 0 {
					lo = strconv.FormatUint(uint64(curve[i-1].age), 10)
				}
				break
			}
		}
		out = append(out, lo, hi)
	}
	return out
}

// bruteProjectAge is project_read_by_age's values of the rows of a
// project's messages at one age, as text: each percentile q the value at
// 0-based rank floor(q × n) of the n values sorted.
func bruteProjectAge(rs []ageRow) string {
	reads := make([]uint64, len(rs))
	rates := make([]float64, len(rs))
	for i, r := range rs {
		reads[i], rates[i] = r.reads, rate(r)
	}
	slices.Sort(reads)
	slices.Sort(rates)
	rank := func(q float64) int { return min(int(q*float64(len(rs))), len(rs)-1) }
	out := []string{strconv.Itoa(len(rs))}
	for _, q := range []float64{0.5, 0.1, 0.9} {
		out = append(out, strconv.FormatUint(reads[rank(q)], 10))
	}
	for _, q := range []float64{0.5, 0.1, 0.9} {
		out = append(out, floatText(rates[rank(q)]))
	}
	return strings.Join(out, "\t")
}

// rate is a row's read rate: reads over total, 0 for none.
func rate(r ageRow) float64 {
	if r.total == 0 {
		return 0
	}
	return float64(r.reads) / float64(r.total)
}

// floatText is a Float64 as viewColumn.sql reads it: its bits.
func floatText(f float64) string { return strconv.FormatUint(math.Float64bits(f), 10) }

// nullNumber is a Nullable number as viewColumn.sql reads it.
func nullNumber(v uint64, ok bool) string {
	if !ok {
		return "NULL"
	}
	return strconv.FormatUint(v, 10)
}
