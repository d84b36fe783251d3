package derived

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// A refresh at the tip: a write of a project's snapshot newer than every
// row of the project (a daemon's pass, a backfill of now) changes the
// derived rows of that snapshot alone, and what they are computed from is
// small and known before the write: each message's latest row, which is
// its previous row at the new snapshot, and the project's tip (package
// schema's tips.go), the sums of the gains of its newest snapshot's day
// and hour so far. Prepare reads both, from rollups with a row per
// message and per project, before the rows are written; Refresh then
// computes the snapshot's gains, its day's and hour's values and gains
// and the new tip from them and the rows written, and reads nothing of
// the history: a pass costs the server what it writes, however long the
// history stored.
//
// The values are those a refresh from the stored history would compute
// from the same rows, with the same keys, so either may land after the
// other. What was read before the write may be stale by the time the
// rows land (another process wrote the project meanwhile, or recomputed
// it): the reconcile, which reads every change, refreshes from the stored
// history any change that another write or recomputation of its project
// came near (reconcile.go), and a tip that a refresh wrote from rows that
// were stale has a lower key than the one a refresh that saw them all
// writes, so it loses.

// Prepared is what the refresh of a write read before the write (see
// Prepare). Its zero value, or nil, read nothing: the refresh then
// recomputes everything from the stored history.
//
// It lives from before the write's INSERTs to the end of its refresh,
// beside the batch: its rows are kept flat and sorted, not in maps, so
// that a pass's peak memory stays near its batch's.
type Prepared struct {
	// readAt is the server's time when it was read, before the write:
	// the record of the refresh says the change it made came after.
	readAt uint32
	// projects are the projects read, sorted.
	projects []int64
	// latest holds each message's latest row of the projects read,
	// sorted by project and message.
	latest []msgRow
	// tips holds the tips of the projects read that have one.
	tips map[int64]tip
	// id names the write's refresh in the record of refreshes, under
	// which Prepare recorded the start of the recomputation of the
	// projects the refresh does not take at the tip (if any); 0 where
	// Prepare did not get that far. atTipWrites are the writes it takes
	// there (atTip).
	id          uint64
	atTipWrites tipWrites
}

// refreshID is the id of the refresh of the write p was read for: the
// one Prepare recorded, or a new one.
func (p *Prepared) refreshID() uint64 {
	if !p.recorded() {
		return newRefreshID()
	}
	return p.id
}

// recorded reports whether Prepare split the write at the tip and
// recorded the start of the recomputation of its projects not taken there.
func (p *Prepared) recorded() bool { return p != nil && p.id != 0 }

// splitAtTip returns the writes of written, the rows Prepare read for, a
// refresh at the tip takes, and the rest, which it recomputes from the
// stored history.
func (p *Prepared) splitAtTip(written []sink.Snapshot) (tipWrites, []sink.Snapshot) {
	var atTip tipWrites
	if p.recorded() {
		atTip = p.atTipWrites
	} else {
		atTip = p.atTip(written) // nil p included: nothing at the tip
	}
	var rest []sink.Snapshot
	for _, s := range written {
		if !atTip.has(s.ProjectID) {
			rest = append(rest, s)
		}
	}
	return atTip, rest
}

// msgRow is a message's row, with its project and message.
type msgRow struct {
	project, message int64
	snapRow
}

// latestOf returns the latest rows of project's messages, by message,
// and whether the project was read.
func (p *Prepared) latestOf(project int64) ([]msgRow, bool) {
	if _, read := slices.BinarySearch(p.projects, project); !read {
		return nil, false
	}
	lo := sort.Search(len(p.latest), func(i int) bool { return p.latest[i].project >= project })
	hi := lo + sort.Search(len(p.latest)-lo, func(i int) bool { return p.latest[lo+i].project > project })
	return p.latest[lo:hi], true
}

// Prepare reads, before the rows written are written, what their refresh
// needs: for each project whose rows are one write at one snapshot, its
// messages' latest rows and its tip; and the server's time. An error
// leaves the refresh to the stored history; the write goes on.
func (h *History) Prepare(ctx context.Context, written []sink.Snapshot) (*Prepared, error) {
	if len(written) == 0 || h.names.Clustered() {
		// In cluster mode a read may find a replica behind: every
		// change is recomputed by the reconcile, as before.
		return nil, nil
	}
	var projects []int64
	for _, w := range oneWrites(written) {
		projects = append(projects, w.project)
	}
	pt, err := chconn.ProjectsExt("tip_projects", projects)
	if err != nil {
		return nil, err
	}
	in := h.names.InExt("project_id", "tip_projects")
	// One statement: the time, the tips, the latest rows.
	q := fmt.Sprintf(`SELECT 0 AS kind, toInt64(0) AS project_id, toInt64(0) AS message_id, toUInt64(toUInt32(now())) AS a, toUInt64(0) AS v,
    toUInt64(0) AS r, toUInt64(0) AS t, '' AS tip
UNION ALL
SELECT 1, project_id, toInt64(0), toUInt64(0), toUInt64(0), toUInt64(0), toUInt64(0), maxMerge(tip_state)
FROM %s
WHERE %s
GROUP BY project_id
UNION ALL
SELECT 2, project_id, message_id, %s, %s, %s, %s, ''
FROM
(
    SELECT project_id, message_id, maxMerge(latest_row) AS message_row
    FROM %s
    WHERE %s
    GROUP BY project_id, message_id
)`, h.names.Table(schema.TipRollup), in,
		schema.RowUInt64("message_row", schema.RowSnapshotAt), schema.RowUInt64("message_row", schema.RowVersion),
		schema.RowUInt64("message_row", schema.RowReadCount), schema.RowUInt64("message_row", schema.RowTotal),
		h.names.Table(schema.LatestRollup), in)
	p := &Prepared{projects: projects, tips: map[int64]tip{}}
	err = chconn.QueryEach(chconn.WithExternal(ctx, pt), h.conn, q, func(rows driver.Rows) error {
		var (
			kind             uint8
			project, message int64
			at, v, r, t      uint64
			encoded          string
		)
		if err := rows.Scan(&kind, &project, &message, &at, &v, &r, &t, &encoded); err != nil {
			return err
		}
		switch kind {
		case 0:
			p.readAt = uint32(at)
		case 1:
			if tp, ok := decodeTip(encoded); ok {
				p.tips[project] = tp
			}
		default:
			p.latest = append(p.latest, msgRow{project, message, snapRow{at: uint32(at), version: v, reads: r, total: t}})
		}
		return nil
	})
	if err != nil {
		return nil, h.conn.Redact(fmt.Errorf("read the latest rows and tips of %d projects before a write: %w", len(projects), err))
	}
	slices.SortFunc(p.latest, msgRow.compare)
	// The projects the refresh will recompute from the stored history
	// are recorded as recomputed from before their rows are written: the
	// reconcile judges a change by the second it was made in, and a write
	// killed between its rows and its refresh, in the second another
	// write of the same project snapshot was refreshed in, would
	// otherwise leave a change that looks like the other's, refreshed.
	// Recorded, the start keeps the reconcile from leaving the project's
	// changes near it to their writers (refreshes.go). It is the record
	// the refresh makes anyway, made earlier.
	atTip, rest := p.splitAtTip(written)
	id := newRefreshID()
	if len(rest) > 0 {
		if err := h.recordStarts(ctx, id, writtenSnapshots(rest).Projects()); err != nil {
			return nil, err
		}
	}
	p.id, p.atTipWrites = id, atTip
	return p, nil
}

func (a msgRow) compare(b msgRow) int {
	return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.message, b.message))
}

// oneWrite is a project's rows in a write that are all at one snapshot:
// each message's newest, by message, as indexes of the rows written.
type oneWrite struct {
	project int64
	at      uint32
	rows    []int32
}

// oneWrites returns the projects of written whose rows are all at one
// snapshot, those a refresh at the tip may take, by project. It holds
// an index of the rows, not a copy of them.
func oneWrites(written []sink.Snapshot) []oneWrite {
	idx := make([]int32, len(written))
	for i := range idx {
		idx[i] = int32(i)
	}
	// By project and message, each message's highest version first.
	slices.SortFunc(idx, func(a, b int32) int {
		x, y := &written[a], &written[b]
		return cmp.Or(cmp.Compare(x.ProjectID, y.ProjectID), cmp.Compare(x.MessageID, y.MessageID), cmp.Compare(y.Version, x.Version))
	})
	var out []oneWrite
	for lo := 0; lo < len(idx); {
		project := written[idx[lo]].ProjectID
		hi, at, one := lo, written[idx[lo]].SnapshotAt, true
		for ; hi < len(idx) && written[idx[hi]].ProjectID == project; hi++ {
			one = one && written[idx[hi]].SnapshotAt == at
		}
		if one {
			rows := idx[lo:lo]
			for _, i := range idx[lo:hi] {
				if len(rows) == 0 || written[rows[len(rows)-1]].MessageID != written[i].MessageID {
					rows = append(rows, i)
				}
			}
			out = append(out, oneWrite{project: project, at: uint32(at), rows: rows})
		}
		lo = hi
	}
	return out
}

// tipWrites are the writes a refresh at the tip takes, by project.
type tipWrites []oneWrite

func (t tipWrites) has(project int64) bool {
	_, ok := slices.BinarySearchFunc(t, project, func(w oneWrite, p int64) int { return cmp.Compare(w.project, p) })
	return ok
}

// atTip returns the writes of written that a refresh at the tip takes:
// a project's one write at a snapshot newer than all its messages' latest
// rows, whose tip is at the newest of those (or that has neither: a new
// project).
func (p *Prepared) atTip(written []sink.Snapshot) tipWrites {
	if p == nil || p.projects == nil {
		return nil
	}
	var out tipWrites
	for _, w := range oneWrites(written) {
		latest, read := p.latestOf(w.project)
		if !read {
			continue
		}
		var newest uint32
		for _, r := range latest {
			newest = max(newest, r.at)
		}
		t, hasTip := p.tips[w.project]
		switch {
		case len(latest) == 0 && !hasTip:
		case len(latest) == 0, w.at <= newest, !hasTip, t.at != newest:
			continue
		}
		out = append(out, w)
	}
	return out
}

// eachMessage calls f for each message of a write at the tip or of its
// project's latest rows, in order: cur is its row written (nil for
// none), prev its latest row before the write (nil for none).
func eachMessage(w oneWrite, written []sink.Snapshot, latest []msgRow, f func(cur, prev *snapRow)) {
	i, j := 0, 0
	for i < len(w.rows) || j < len(latest) {
		var cur, prev *snapRow
		var m int64
		switch {
		case j == len(latest):
			m = written[w.rows[i]].MessageID
		case i == len(w.rows):
			m = latest[j].message
		default:
			m = min(written[w.rows[i]].MessageID, latest[j].message)
		}
		if i < len(w.rows) && written[w.rows[i]].MessageID == m {
			s := &written[w.rows[i]]
			cur = &snapRow{at: uint32(s.SnapshotAt), version: s.Version, reads: s.ReadCount, total: s.Total}
			i++
		}
		if j < len(latest) && latest[j].message == m {
			prev = &latest[j].snapRow
			j++
		}
		f(cur, prev)
	}
}

// refreshAtTip refreshes the writes of tips from p: the gains at each
// snapshot, the values and gains of its day and hour, and the project's
// new tip.
func (h *History) refreshAtTip(ctx context.Context, p *Prepared, tips tipWrites, written []sink.Snapshot, schedule string) error {
	if len(tips) == 0 {
		return nil
	}
	sums := map[gainTarget]*gainSum{}
	schedules := map[gainTarget]string{}
	for _, w := range tips {
		g := &gainSum{}
		latest, _ := p.latestOf(w.project)
		eachMessage(w, written, latest, func(cur, prev *snapRow) {
			if cur != nil {
				g.add(*cur, prev)
			}
		})
		t := gainTarget{w.project, w.at}
		sums[t] = g
		if schedule != "" {
			schedules[t] = schedule
		}
	}
	ticks, err := h.ticksOf(ctx, sums, schedules)
	if err != nil {
		return err
	}
	var (
		gains   []schema.GainRow
		values  = map[chconn.Period]map[chconn.ProjectDay]periodValues{chconn.Day: {}, chconn.Hour: {}}
		gainSum = map[chconn.Period]map[chconn.ProjectDay]*daySum{chconn.Day: {}, chconn.Hour: {}}
		newTips = map[int64]tip{}
	)
	for _, w := range tips {
		t := gainTarget{w.project, w.at}
		latest, _ := p.latestOf(w.project)
		row := gainRowOf(t, sums[t], schedules[t], ticks)
		gains = append(gains, row)
		next := tip{at: t.at}
		old, hasTip := p.tips[t.project]
		for _, period := range []chconn.Period{chconn.Day, chconn.Hour} {
			pd := chconn.ProjectDay{Project: t.project, Day: period.Of(t.at)}
			values[period][pd] = periodValuesAt(period, w, written, latest)
			s := newDaySum()
			if hasTip && period.Of(old.at) == pd.Day {
				s = old.sums(period).clone()
			}
			if err := s.addGain(row); err != nil {
				return err
			}
			gainSum[period][pd] = s
			*next.sums(period) = *s
		}
		newTips[t.project] = next
	}
	if err := chconn.Insert(ctx, h.conn, schema.GainsTable, nil, gains); err != nil {
		return err
	}
	for _, period := range []chconn.Period{chconn.Day, chconn.Hour} {
		if err := h.writePeriodValues(ctx, period, values[period]); err != nil {
			return err
		}
		if err := h.writeGainDays(ctx, period, gainSum[period]); err != nil {
			return err
		}
	}
	return h.writeTips(ctx, newTips)
}

// gainRowOf is the gains row of the snapshot t from its sums, judged by
// schedule's ticks (see gainRows).
func gainRowOf(t gainTarget, g *gainSum, schedule string, ticks map[string][]uint32) schema.GainRow {
	var missed uint64
	if g.prevAt > 0 && schedule != "" {
		ts := ticks[schedule]
		lo, _ := slices.BinarySearch(ts, g.prevAt+1)
		hi, _ := slices.BinarySearch(ts, t.at)
		missed = uint64(hi - lo)
	}
	return schema.GainRow{
		ProjectID: t.project, SnapshotAt: sink.Time(t.at).Time(), Key: g.key(schedule != "", missed), PrevAt: sink.Time(g.prevAt).Time(),
		Messages: g.messages, NewMessages: g.newMessages, Reads: int64(g.reads), MissedTicks: missed, Schedule: schedule,
		SnapMessages: g.topMessages, SnapReads: g.topReads, SnapTotal: g.topTotal,
	}
}

// periodValues are a project's values in a period (day or hour), as the
// day rollup and the hour rollup keep them: over its messages' last rows
// of the period, their number, reads and totals summed, and the sums its
// refresh key is made of (package schema's dayrefresh.go).
type periodValues struct {
	messages, reads, total      uint64
	ats, versionsHi, versionsLo uint64
}

func (v *periodValues) add(r snapRow) {
	v.messages++
	v.reads += r.reads
	v.total += r.total
	v.ats += uint64(r.at)
	v.versionsHi += r.version >> 32
	v.versionsLo += r.version & (1<<32 - 1)
}

// key is the refresh key schema.DayRefresh computes from the same rows:
// each sum offset by 10^19 and written in 20 digits.
func (v periodValues) key() string {
	const offset = 10_000_000_000_000_000_000
	return fmt.Sprintf("%020d%020d%020d%020d", v.messages+offset, v.ats+offset, v.versionsHi+offset, v.versionsLo+offset)
}

// periodValuesAt returns the values of the period of p that holds w's
// snapshot, the newest of the project, from the rows written there and
// the messages' latest rows before: each message's last row of the
// period is its row written, or else its latest row, if that lies in the
// period.
func periodValuesAt(p chconn.Period, w oneWrite, written []sink.Snapshot, latest []msgRow) periodValues {
	var v periodValues
	eachMessage(w, written, latest, func(cur, prev *snapRow) {
		switch {
		case cur != nil:
			v.add(*cur)
		case p.Of(prev.at) == p.Of(w.at):
			v.add(*prev)
		}
	})
	return v
}

// writePeriodValues writes the values of the project periods of vals
// into the rollup of p's periods: the day rollup or the hour rollup, in
// the form their refreshes from the stored history write.
func (h *History) writePeriodValues(ctx context.Context, p chconn.Period, vals map[chconn.ProjectDay]periodValues) error {
	if len(vals) == 0 {
		return nil
	}
	rollup, _ := periodRollup(p)
	col := p.Column()
	input, err := chconn.NewExtTable("period_values", "project_id", "Int64", col, p.Type(), "messages", "UInt64",
		"reads", "UInt64", "total", "UInt64", "refresh_key", "String")
	if err != nil {
		return fmt.Errorf("refresh %s: %w", rollup, err)
	}
	for _, pd := range slices.SortedFunc(maps.Keys(vals), chconn.ProjectDay.Compare) {
		v := vals[pd]
		key := v.key()
		if p == chconn.Hour {
			key = schema.HourRowOf(key, v.messages, v.reads, v.total)
		}
		if err := input.Append(pd.Project, sink.Time(p.Start(pd.Day)).Time(), v.messages, v.reads, v.total, key); err != nil {
			return fmt.Errorf("refresh %s: %w", rollup, err)
		}
	}
	state := "argMaxState((messages, reads, total), refresh_key)"
	if p == chconn.Hour {
		state = "maxState(refresh_key)" // the HourRow, whose key comes first
	}
	q := fmt.Sprintf("INSERT INTO %s (project_id, %s, %s_state) SELECT project_id, %s, %s FROM period_values GROUP BY project_id, %s",
		h.names.Table(rollup), col, col, col, state, col)
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), input), q); err != nil {
		return h.conn.Redact(fmt.Errorf("refresh %d project %ss of %s: %w", len(vals), col, rollup, err))
	}
	return nil
}

// tip is a project's derived state at its newest snapshot (package
// schema's tips.go): the gains of that snapshot's UTC day and hour up to
// it, summed, with their keys' sums.
type tip struct {
	at        uint32
	day, hour daySum
}

func (t *tip) sums(p chconn.Period) *daySum {
	if p == chconn.Day {
		return &t.day
	}
	return &t.hour
}

// tipLen is the length of an encoded tip: the snapshot, then for the day
// and the hour a day gains key and three values.
var tipLen = 4 + 2*(len(dayGainKey(0, newDaySum().key))+3*8)

// encode writes t as the String the tip rollup keeps the maximum of: the
// snapshot's time (4 bytes, most significant first), then the day's key,
// so that a newer snapshot's tip, or one whose refresh saw more, is
// greater.
func (t tip) encode() string {
	var b strings.Builder
	b.Write(binary.BigEndian.AppendUint32(nil, t.at))
	for _, s := range []*daySum{&t.day, &t.hour} {
		b.WriteString(dayGainKey(s.snapshots, s.key))
		var vals []byte
		for _, v := range []uint64{s.newMessages, uint64(s.reads), s.missed} {
			vals = binary.BigEndian.AppendUint64(vals, v)
		}
		b.Write(vals)
	}
	return b.String()
}

// decodeTip reads a tip back; ok is false for a String that is no tip of
// this form (a reset, see resetTip).
func decodeTip(s string) (t tip, ok bool) {
	if len(s) != tipLen {
		return tip{}, false
	}
	t.at = binary.BigEndian.Uint32([]byte(s[:4]))
	pos := 4
	keyLen := len(gainKeyFormat) + 20 + len(gainKeyWidths)*45
	for _, sum := range []*daySum{&t.day, &t.hour} {
		key := s[pos : pos+keyLen]
		if !strings.HasPrefix(key, gainKeyFormat) {
			return tip{}, false
		}
		n, ok := new(big.Int).SetString(key[len(gainKeyFormat):len(gainKeyFormat)+20], 10)
		if !ok {
			return tip{}, false
		}
		*sum = *newDaySum()
		sum.snapshots = n.Uint64()
		for i := range gainKeyWidths {
			at := len(gainKeyFormat) + 20 + i*45
			if _, ok := sum.key[i].SetString(key[at:at+45], 10); !ok {
				return tip{}, false
			}
		}
		pos += keyLen
		vals := []byte(s[pos : pos+24])
		sum.newMessages = binary.BigEndian.Uint64(vals)
		sum.reads = int64(binary.BigEndian.Uint64(vals[8:]))
		sum.missed = binary.BigEndian.Uint64(vals[16:])
		pos += 24
	}
	return t, true
}

// resetTip is the String that outranks every tip of the snapshot at, and
// decodes as none: written where a tip may be wrong (a repair), it makes
// the next write's refresh recompute from the stored history, which
// writes a tip at its newer snapshot.
func resetTip(at uint32) string {
	return string(binary.BigEndian.AppendUint32(nil, at)) + "\xff"
}

// writeTips writes the tips of tips, by project, into the tip rollup.
func (h *History) writeTips(ctx context.Context, tips map[int64]tip) error {
	encoded := map[int64]string{}
	for p, t := range tips {
		encoded[p] = t.encode()
	}
	return h.writeTipStrings(ctx, encoded)
}

// writeTipStrings writes encoded tips (or resets), by project.
func (h *History) writeTipStrings(ctx context.Context, tips map[int64]string) error {
	if len(tips) == 0 || !h.tipped() {
		return nil
	}
	input, err := chconn.NewExtTable("tips", "project_id", "Int64", "tip", "String")
	if err != nil {
		return err
	}
	for _, p := range slices.Sorted(maps.Keys(tips)) {
		if err := input.Append(p, tips[p]); err != nil {
			return err
		}
	}
	q := fmt.Sprintf("INSERT INTO %s (project_id, tip_state) SELECT project_id, maxState(tip) FROM tips GROUP BY project_id", h.names.Table(schema.TipRollup))
	if err := h.conn.Exec(chconn.WithExternal(h.conn.SyncInserts(ctx), input), q); err != nil {
		return h.conn.Redact(fmt.Errorf("write the tips of %d projects into %s: %w", len(tips), schema.TipRollup, err))
	}
	return nil
}

// newDaySum is an empty sum of gains, with its key's components.
func newDaySum() *daySum {
	s := &daySum{}
	for range gainKeyWidths {
		s.key = append(s.key, new(big.Int))
	}
	return s
}

func (s *daySum) clone() *daySum {
	c := *s
	c.key = make([]*big.Int, len(s.key))
	for i, k := range s.key {
		c.key[i] = new(big.Int).Set(k)
	}
	return &c
}

// addGain adds the snapshot of row to the sums.
func (s *daySum) addGain(row schema.GainRow) error {
	s.snapshots++
	s.newMessages += row.NewMessages
	s.reads += row.Reads
	s.missed += row.MissedTicks
	if err := addKey(s.key, row.Key); err != nil {
		return errors.Join(fmt.Errorf("project %d at %s", row.ProjectID, row.SnapshotAt), err)
	}
	return nil
}
