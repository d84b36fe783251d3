package verify

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// The brute force of every view (see verify.go): what each view defines,
// computed from the stored rows the simplest way, in Go, a group of
// projects at a time.

// bruteRow is a snapshot row as the brute force reads it.
type bruteRow struct {
	at             uint32
	version        uint64
	reads, total   uint64
	percent        float64
	project, msgID int64
}

// bruteForce computes every view's rows in the window w, a step of
// projects at a time, and compares each step's with the views' rows of
// the same projects in c.
func (c *Checker) bruteForce(ctx context.Context, w verifyWindow, judged *comparison) error {
	for _, g := range w.groups() {
		steps, err := c.steps(ctx, g, w)
		if err != nil {
			return fmt.Errorf("brute force: %w", err)
		}
		for _, s := range steps {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			out := map[string]viewRows{}
			for _, v := range schema.Views() {
				out[v] = viewRows{}
			}
			names, err := c.stepNames(ctx, s)
			if err != nil {
				return fmt.Errorf("brute force: %w", err)
			}
			if err := c.bruteStep(ctx, s, g.start, names, out); err != nil {
				return fmt.Errorf("brute force: %w", err)
			}
			if err := c.compareProjects(ctx, judged, s, g.start, out); err != nil {
				return err
			}
			// The views on the message's clock, over the same step.
			if err := c.ageStep(ctx, s, g.start, names, judged); err != nil {
				return fmt.Errorf("brute force of the curves: %w", err)
			}
		}
	}
	coverage, err := c.bruteCoverage(ctx, w)
	if err != nil {
		return fmt.Errorf("brute force: %w", err)
	}
	return c.compareCoverage(ctx, judged, w, coverage)
}

// stepNames reads the names of the step s (bruteNames), which the brute
// forces of every view of the step share.
func (c *Checker) stepNames(ctx context.Context, s step) (bruteNamesOf, error) {
	_, ext, err := s.filter(c.names, "project_id")
	if err != nil {
		return bruteNamesOf{}, err
	}
	return c.bruteNames(chconn.WithExternal(ctx, ext...), s)
}

// bruteNamesOf are the names the views join: each project's nft and name,
// and each message's subject, by their newest versions.
type bruteNamesOf struct {
	projects map[int64][2]string
	subjects map[msgKey]string
}

// bruteNames reads the names of the projects of the step s and of their
// messages.
func (c *Checker) bruteNames(ctx context.Context, s step) (bruteNamesOf, error) {
	n := bruteNamesOf{projects: map[int64][2]string{}, subjects: map[msgKey]string{}}
	byID, _, err := s.filter(c.names, "id")
	if err != nil {
		return n, err
	}
	byProject, _, err := s.filter(c.names, "project_id")
	if err != nil {
		return n, err
	}
	err = chconn.QueryEach(ctx, c.conn, "SELECT id, argMax(nft, version), argMax(name, version) FROM "+c.names.Table(schema.ProjectsTable.Name())+
		" WHERE "+byID+" GROUP BY id",
		func(rows driver.Rows) error {
			var (
				id        int64
				nft, name string
			)
			if err := rows.Scan(&id, &nft, &name); err != nil {
				return err
			}
			n.projects[id] = [2]string{nft, name}
			return nil
		})
	if err != nil {
		return n, fmt.Errorf("read the projects' names: %w", err)
	}
	err = chconn.QueryEach(ctx, c.conn, "SELECT project_id, id, argMax(subject, version) FROM "+c.names.Table(schema.MessagesTable.Name())+
		" WHERE "+byProject+" GROUP BY project_id, id",
		func(rows driver.Rows) error {
			var (
				k       msgKey
				subject string
			)
			if err := rows.Scan(&k.project, &k.message, &subject); err != nil {
				return err
			}
			n.subjects[k] = subject
			return nil
		})
	if err != nil {
		return n, fmt.Errorf("read the messages' subjects: %w", err)
	}
	return n, nil
}

// bruteCoverage returns schedule_coverage's rows in the window w, counted
// from sync_runs: a cron tick is due once whatever the shards that
// recorded it, runs when every record of it ran, is ok when every one
// finished ok, and is skipped or missed when any record says so.
func (c *Checker) bruteCoverage(ctx context.Context, w verifyWindow) (viewRows, error) {
	days := w.coverageDays("schedule", "toDate(snapshot_at, 'UTC')")
	q := fmt.Sprintf(`SELECT schedule, toString(day), toString(count()), toString(sum(run)), toString(sum(ok)), toString(sum(skipped)), toString(sum(missed))
FROM
(
    SELECT schedule, toDate(snapshot_at, 'UTC') AS day, snapshot_at,
        min(status IN ('ok', 'partial', 'failed')) AS run, min(status = 'ok') AS ok,
        max(status = 'skipped') AS skipped, max(status = 'missed') AS missed
    FROM %s
    WHERE trigger = 'cron' AND %s
    GROUP BY schedule, snapshot_at
)
GROUP BY schedule, day`, c.names.Table(schema.RunsTable.Name()), days)
	rows := viewRows{}
	err := chconn.QueryEach(ctx, c.conn, q, func(r driver.Rows) error {
		var schedule, day, due, run, ok, skipped, missed string
		if err := r.Scan(&schedule, &day, &due, &run, &ok, &skipped, &missed); err != nil {
			return err
		}
		rows[schedule+"\t"+day] = strings.Join([]string{due, run, ok, skipped, missed}, "\t")
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count the ticks of sync_runs: %w", err)
	}
	return rows, nil
}

// bruteTicks returns, per schedule of spans, the sorted times of its cron
// ticks that sync_runs records within the span (exclusive): what the
// missed ticks of a step's snapshots count. A record is written at or
// after its tick: those started from a span's start, less an hour, hold
// the span's ticks.
func (c *Checker) bruteTicks(ctx context.Context, spans map[string][2]uint32) (map[string][]uint32, error) {
	out := map[string][]uint32{}
	for _, s := range slices.Sorted(maps.Keys(spans)) {
		sp := spans[s]
		ts, err := chconn.QueryColumn[uint32](ctx, c.conn, fmt.Sprintf(
			"SELECT DISTINCT toUInt32(snapshot_at) AS t FROM %s WHERE started_at >= %s AND trigger = 'cron' AND schedule = %s AND snapshot_at > %s AND snapshot_at < %s ORDER BY t",
			c.names.Table(schema.RunsTable.Name()), chconn.DateTime(sp[0]-min(sp[0], 3600)), chconn.QuoteString(s), chconn.DateTime(sp[0]), chconn.DateTime(sp[1])))
		if err != nil {
			return nil, fmt.Errorf("read the ticks of schedule %q: %w", s, err)
		}
		out[s] = ts
	}
	return out, nil
}

// bruteStep computes the rows of the snapshot views for the step s, whose
// window starts at from.
func (c *Checker) bruteStep(ctx context.Context, s step, from uint32, names bruteNamesOf, out map[string]viewRows) error {
	filter, ext, err := s.filter(c.names, "project_id")
	if err != nil {
		return err
	}
	ctx = chconn.WithExternal(ctx, ext...)
	priors, unfound, err := c.brutePriors(ctx, filter, from)
	if err != nil {
		return err
	}
	expired, err := c.bruteExpiredPriors(ctx, filter, unfound, from)
	if err != nil {
		return err
	}
	schedules, err := c.bruteSchedules(ctx, filter, from)
	if err != nil {
		return err
	}
	q := fmt.Sprintf(`SELECT project_id, message_id, toUInt32(snapshot_at), version, read_count, total, percent
FROM %s
WHERE %s AND snapshot_at >= %s
ORDER BY project_id, message_id, snapshot_at, version`, c.names.Table(schema.SnapshotsTable.Name()), filter, chconn.DateTime(from))
	// Each message's newest row at each of its snapshots, in order.
	var (
		msg     []bruteRow
		current msgKey
		started bool
	)
	acc := newBruteAcc()
	err = chconn.QueryEach(ctx, c.conn, q, func(rows driver.Rows) error {
		var r bruteRow
		if err := rows.Scan(&r.project, &r.msgID, &r.at, &r.version, &r.reads, &r.total, &r.percent); err != nil {
			return err
		}
		k := msgKey{r.project, r.msgID}
		if started && k != current {
			acc.message(current, msg, priors, expired[current])
			msg = msg[:0]
		}
		current, started = k, true
		if n := len(msg); n > 0 && msg[n-1].at == r.at {
			msg[n-1] = r // a newer version of the same snapshot
			return nil
		}
		msg = append(msg, r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the snapshot rows of projects %d to %d: %w", s.lo, s.hi, err)
	}
	if started {
		acc.message(current, msg, priors, expired[current])
	}
	ticks, err := c.bruteTicks(ctx, acc.spans(schedules))
	if err != nil {
		return err
	}
	acc.rows(names, schedules, ticks, out)
	return nil
}

// brutePriors returns each message's newest row before from, for the
// messages with rows from from on of the projects of ctx's external table
// "verified". It reads back from from a widening span at a time, each
// before the one before, for the messages it has not found yet: a message
// seen a minute before costs a granule, one first seen in the window its
// project's whole earlier history (which only that proves).
//
// It also returns the messages of the window with no row before it.
func (c *Checker) brutePriors(ctx context.Context, filter string, from uint32) (map[msgKey]bruteRow, map[msgKey]bool, error) {
	out := map[msgKey]bruteRow{}
	if from == 0 {
		return out, nil, nil
	}
	table := c.names.Table(schema.SnapshotsTable.Name())
	want := map[msgKey]bool{}
	err := chconn.QueryEach(ctx, c.conn, fmt.Sprintf("SELECT DISTINCT project_id, message_id FROM %s WHERE %s AND snapshot_at >= %s",
		table, filter, chconn.DateTime(from)), func(rows driver.Rows) error {
		var k msgKey
		if err := rows.Scan(&k.project, &k.message); err != nil {
			return err
		}
		want[k] = true
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read the messages of the window: %w", err)
	}
	hi := from
	for _, span := range []uint32{3600, 86400, 16 * 86400, 256 * 86400, 0} {
		if len(want) == 0 || hi == 0 {
			break
		}
		lo := uint32(0)
		if span != 0 && from > span {
			lo = from - span
		}
		if err := c.brutePriorsIn(ctx, filter, want, lo, hi, out); err != nil {
			return nil, nil, err
		}
		hi = lo
	}
	return out, want, nil
}

// bruteExpiredPriors returns the messages of unfound, which have no row
// before from, that were seen before from all the same: their rows before
// it expired (READSYNC_RETAIN_RAW), so the reads gained at their first
// snapshot from from on were computed from a row that is gone, and are
// taken as given. When a message was first seen is a fact of the history
// that outlives its rows only in the first-seen rollup, which this reads.
func (c *Checker) bruteExpiredPriors(ctx context.Context, filter string, unfound map[msgKey]bool, from uint32) (map[msgKey]bool, error) {
	out := map[msgKey]bool{}
	if len(unfound) == 0 || c.edge == 0 {
		return out, nil
	}
	wanted, err := chconn.NewExtTable("unfound", "project_id", "Int64", "message_id", "Int64")
	if err != nil {
		return nil, err
	}
	for k := range unfound {
		if err := wanted.Append(k.project, k.message); err != nil {
			return nil, err
		}
	}
	q := fmt.Sprintf(`SELECT project_id, message_id FROM %s
WHERE %s AND %s
GROUP BY project_id, message_id
HAVING minMerge(first_seen) < %s`, c.names.Table(schema.FirstRollup), filter,
		c.names.InExt("project_id, message_id", "unfound"), chconn.DateTime(from))
	err = chconn.QueryEach(chconn.WithExternal(ctx, wanted), c.conn, q, func(rows driver.Rows) error {
		var k msgKey
		if err := rows.Scan(&k.project, &k.message); err != nil {
			return err
		}
		out[k] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read when the messages with no row before %s were first seen: %w", sink.Time(from), err)
	}
	return out, nil
}

// brutePriorsIn puts into out the newest row in [lo, hi) of each message
// of want that has one, and takes it out of want.
func (c *Checker) brutePriorsIn(ctx context.Context, filter string, want map[msgKey]bool, lo, hi uint32, out map[msgKey]bruteRow) error {
	wanted, err := chconn.NewExtTable("prior_of", "project_id", "Int64", "message_id", "Int64")
	if err != nil {
		return err
	}
	for _, k := range slices.SortedFunc(maps.Keys(want), func(a, b msgKey) int {
		return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.message, b.message))
	}) {
		if err := wanted.Append(k.project, k.message); err != nil {
			return err
		}
	}
	q := fmt.Sprintf(`SELECT project_id, message_id, toUInt32(tupleElement(newest, 1)), tupleElement(newest, 2), tupleElement(newest, 3)
FROM
(
    SELECT project_id, message_id, argMax((snapshot_at, version, read_count), (snapshot_at, version)) AS newest
    FROM %s
    WHERE %s AND snapshot_at >= %s AND snapshot_at < %s AND %s
    GROUP BY project_id, message_id
)`, c.names.Table(schema.SnapshotsTable.Name()), filter, chconn.DateTime(lo), chconn.DateTime(hi),
		c.names.InExt("project_id, message_id", "prior_of"))
	err = chconn.QueryEach(chconn.WithExternal(ctx, wanted), c.conn, q, func(rows driver.Rows) error {
		var r bruteRow
		if err := rows.Scan(&r.project, &r.msgID, &r.at, &r.version, &r.reads); err != nil {
			return err
		}
		k := msgKey{r.project, r.msgID}
		out[k] = r
		delete(want, k)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the messages' rows from %s to %s, before the window: %w", sink.Time(lo), sink.Time(hi), err)
	}
	return nil
}

// bruteSchedules returns the schedule of each snapshot from from on, of
// the projects of ctx's external table "verified", that has one: its
// newest write's, else the one release 0.3.0 counted its missed ticks by
// (see gainschedules.go).
func (c *Checker) bruteSchedules(ctx context.Context, filter string, from uint32) (map[gainTarget]string, error) {
	out := map[gainTarget]string{}
	for _, src := range []struct{ table, schedule string }{
		{schema.SnapshotsTable.Name(), "argMax(schedule, version)"},
		{schema.LegacySchedules, "any(schedule)"},
	} {
		q := fmt.Sprintf("SELECT project_id, toUInt32(snapshot_at), %s FROM %s WHERE %s AND snapshot_at >= %s GROUP BY project_id, snapshot_at",
			src.schedule, c.names.Table(src.table), filter, chconn.DateTime(from))
		err := chconn.QueryEach(ctx, c.conn, q,
			func(rows driver.Rows) error {
				var (
					t gainTarget
					s string
				)
				if err := rows.Scan(&t.project, &t.at, &s); err != nil {
					return err
				}
				if s != "" && out[t] == "" {
					out[t] = s
				}
				return nil
			})
		if err != nil {
			return nil, fmt.Errorf("read the snapshots' schedules from %s: %w", src.table, err)
		}
	}
	return out, nil
}

// bruteAcc accumulates the views' values over the messages of a group of
// projects. It keeps sums, not rows, so that its memory grows with the
// group's project snapshots and days rather than with its snapshot rows.
type bruteAcc struct {
	latest map[msgKey]bruteRow
	// days: per project and day, the sums of each message's last row that
	// day.
	days      map[chconn.ProjectDay]*bruteSums
	hours     map[chconn.ProjectDay]*bruteSums // by hour since the epoch
	snapshots map[gainTarget]*bruteSnapshot
	// given are the project snapshots whose reads gained were computed
	// from a row that expired: their rows, and their days', are taken
	// as the views hold them.
	given map[gainTarget]bool
}

// bruteSums counts rows and sums their reads and totals.
type bruteSums struct{ n, reads, total uint64 }

func (s *bruteSums) add(r bruteRow) { s.n, s.reads, s.total = s.n+1, s.reads+r.reads, s.total+r.total }

// bruteSnapshot is what the views say of one project snapshot.
type bruteSnapshot struct {
	// The newest write (project_read_snapshots): the messages' newest rows
	// of the highest version among them, summed.
	newestVersion uint64
	newest        bruteSums
	// Reads gained.
	messages, newMessages uint64
	reads                 uint64 // wraps, like the counts
	prevAt                uint32
}

func newBruteAcc() *bruteAcc {
	return &bruteAcc{latest: map[msgKey]bruteRow{}, days: map[chconn.ProjectDay]*bruteSums{}, hours: map[chconn.ProjectDay]*bruteSums{},
		snapshots: map[gainTarget]*bruteSnapshot{},
		given:     map[gainTarget]bool{}}
}

// message takes one message's newest row at each of its snapshots in the
// window, in time order, and prior, its newest row before the window;
// expired says that row expired.
func (a *bruteAcc) message(k msgKey, rows []bruteRow, priors map[msgKey]bruteRow, expired bool) {
	a.latest[k] = rows[len(rows)-1]
	if expired {
		a.given[gainTarget{k.project, rows[0].at}] = true
	}
	prev, hasPrev := priors[k]
	for i, r := range rows {
		for _, per := range []struct {
			p    chconn.Period
			sums map[chconn.ProjectDay]*bruteSums
		}{{chconn.Day, a.days}, {chconn.Hour, a.hours}} {
			if i+1 < len(rows) && per.p.Of(rows[i+1].at) == per.p.Of(r.at) {
				continue
			}
			// The message's last row of its day (hour).
			pd := chconn.ProjectDay{Project: k.project, Day: per.p.Of(r.at)}
			d := per.sums[pd]
			if d == nil {
				d = &bruteSums{}
				per.sums[pd] = d
			}
			d.add(r)
		}
		t := gainTarget{k.project, r.at}
		s := a.snapshots[t]
		if s == nil {
			s = &bruteSnapshot{}
			a.snapshots[t] = s
		}
		switch {
		case s.newest.n == 0 || r.version > s.newestVersion:
			s.newestVersion, s.newest = r.version, bruteSums{}
			s.newest.add(r)
		case r.version == s.newestVersion:
			s.newest.add(r)
		}
		s.messages++
		s.reads += r.reads
		if hasPrev {
			s.reads -= prev.reads
			s.prevAt = max(s.prevAt, prev.at)
		} else {
			s.newMessages++
		}
		prev, hasPrev = r, true
	}
}

// spans returns, per schedule, the span from the earliest previous
// snapshot to the latest snapshot of those judged by it: where their
// missed ticks lie.
func (a *bruteAcc) spans(schedules map[gainTarget]string) map[string][2]uint32 {
	out := map[string][2]uint32{}
	for t, s := range a.snapshots {
		sched := schedules[t]
		if sched == "" || s.prevAt == 0 {
			continue
		}
		sp, ok := out[sched]
		if !ok {
			sp = [2]uint32{s.prevAt, t.at}
		}
		out[sched] = [2]uint32{min(sp[0], s.prevAt), max(sp[1], t.at)}
	}
	return out
}

// rows writes the views' rows of the group into out.
func (a *bruteAcc) rows(names bruteNamesOf, schedules map[gainTarget]string, ticks map[string][]uint32, out map[string]viewRows) {
	name := func(p int64) string { n := names.projects[p]; return n[0] + "\t" + n[1] }
	for k, r := range a.latest {
		out[schema.LatestView][fmt.Sprint(k.project, "\t", k.message)] = strings.Join([]string{name(k.project), names.subjects[k],
			strconv.FormatUint(uint64(r.at), 10), strconv.FormatUint(r.reads, 10), strconv.FormatUint(r.total, 10),
			strconv.FormatUint(math.Float64bits(r.percent), 10)}, "\t")
	}
	for pd, d := range a.days {
		out[schema.DailyView][fmt.Sprint(pd.Project, "\t", dateText(pd.Day))] = name(pd.Project) + "\t" +
			joinNumbers(d.n, d.reads, d.total) + "\t" + rateText(d.reads, d.total)
	}
	for pd, d := range a.hours {
		out[schema.HourlyView][fmt.Sprint(pd.Project, "\t", chconn.Hour.Start(pd.Day))] = name(pd.Project) + "\t" +
			joinNumbers(d.n, d.reads, d.total) + "\t" + rateText(d.reads, d.total)
	}
	type dayGain struct {
		snapshots, newMessages, reads, missed uint64
	}
	days, hours := map[chconn.ProjectDay]*dayGain{}, map[chconn.ProjectDay]*dayGain{}
	givenDays, givenHours := map[chconn.ProjectDay]bool{}, map[chconn.ProjectDay]bool{}
	for t, s := range a.snapshots {
		key := fmt.Sprint(t.project, "\t", t.at)
		out[schema.SnapshotView][key] = name(t.project) + "\t" + joinNumbers(s.newest.n, s.newest.reads, s.newest.total) + "\t" +
			rateText(s.newest.reads, s.newest.total)
		var missed uint64
		if sched := schedules[t]; sched != "" && s.prevAt > 0 {
			ts := ticks[sched]
			lo, _ := slices.BinarySearch(ts, s.prevAt+1)
			hi, _ := slices.BinarySearch(ts, t.at)
			missed = uint64(max(hi-lo, 0))
		}
		out[schema.GainsView][key] = name(t.project) + "\t" + strconv.FormatUint(uint64(s.prevAt), 10) + "\t" +
			joinNumbers(s.messages, s.newMessages) + "\t" + strconv.FormatInt(int64(s.reads), 10) + "\t" + strconv.FormatUint(missed, 10)
		pd := chconn.ProjectDay{Project: t.project, Day: chconn.DayOf(t.at)}
		ph := chconn.ProjectDay{Project: t.project, Day: chconn.Hour.Of(t.at)}
		if a.given[t] {
			out[schema.GainsView][key] = givenRow
			givenDays[pd], givenHours[ph] = true, true
		}
		for _, per := range []struct {
			key  chconn.ProjectDay
			sums map[chconn.ProjectDay]*dayGain
		}{{pd, days}, {ph, hours}} {
			d := per.sums[per.key]
			if d == nil {
				d = &dayGain{}
				per.sums[per.key] = d
			}
			d.snapshots++
			d.newMessages += s.newMessages
			d.reads += s.reads
			d.missed += missed
		}
	}
	for ph, d := range hours {
		key := fmt.Sprint(ph.Project, "\t", chconn.Hour.Start(ph.Day))
		out[schema.HourlyGainsView][key] = name(ph.Project) + "\t" + joinNumbers(d.snapshots, d.newMessages) + "\t" +
			strconv.FormatInt(int64(d.reads), 10) + "\t" + strconv.FormatUint(d.missed, 10)
		if givenHours[ph] {
			out[schema.HourlyGainsView][key] = givenRow
		}
	}
	for pd, d := range days {
		key := fmt.Sprint(pd.Project, "\t", dateText(pd.Day))
		out[schema.DailyGainsView][key] = name(pd.Project) + "\t" + joinNumbers(d.snapshots, d.newMessages) + "\t" +
			strconv.FormatInt(int64(d.reads), 10) + "\t" + strconv.FormatUint(d.missed, 10)
		if givenDays[pd] {
			out[schema.DailyGainsView][key] = givenRow
		}
	}
}

// givenRow stands in the brute force for a row it takes as the view holds
// it (see bruteAcc.given): the comparison leaves the row out, and counts
// it.
const givenRow = "\x00given"

// rateText is a view's read rate, reads over total (0 when total is 0),
// as Verify compares it: the bits of the Float64 ClickHouse computes the
// same way.
func rateText(reads, total uint64) string {
	rate := 0.0
	if total != 0 {
		rate = float64(reads) / float64(total)
	}
	return strconv.FormatUint(math.Float64bits(rate), 10)
}

// dateText writes a day since the Unix epoch as ClickHouse writes a Date.
func dateText(day uint32) string { return sink.Time(day * 86400).Time().Format("2006-01-02") }

func joinNumbers(xs ...uint64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatUint(x, 10)
	}
	return strings.Join(parts, "\t")
}
