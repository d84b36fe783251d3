// Package verify judges readsync's derived history: it compares every
// view users query with its brute force over the stored history
// (message_read_snapshots, sync_runs, projects, messages), the operator's
// fsck of the derived rows and the tests' judge.
//
// It shares no code with what it judges (package derived keeps the rows,
// package schema writes the views): the brute force is written apart, the
// simplest way, one pass over the snapshot rows in the order of (project,
// message, snapshot, version), computing in Go what each view defines
// (brute.go), and it never reads a rollup. A window (window.go) restricts
// both sides to the snapshots from a day on and to what was written since;
// the messages' rows before a project's window are read only for each
// one's newest, the previous row of its first snapshot in the window.
// What it holds at once is one step of projects' rows, whatever the
// history.
package verify

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// Checker judges the derived history of the database of one connection.
// It is safe for concurrent use; the connection stays its caller's.
type Checker struct {
	conn  *chconn.Conn
	names chconn.Names
	// stepRows bounds the snapshot rows of a step (see bruteStepRows).
	stepRows uint64
	// edge is the Unix time before which the raw rows expired, 0 when
	// none did: Verify reads it first.
	edge uint32
}

// Option tunes a Checker.
type Option func(*Checker)

// WithStepRows bounds the snapshot rows one step of the brute force reads
// (bruteStepRows when zero): smaller steps hold less, and send more
// statements.
func WithStepRows(n uint64) Option {
	return func(c *Checker) {
		if n > 0 {
			c.stepRows = n
		}
	}
}

// New returns the Checker of the database of c.
func New(c *chconn.Conn, opts ...Option) *Checker {
	ch := &Checker{conn: c, names: c.Names(), stepRows: bruteStepRows}
	for _, o := range opts {
		o(ch)
	}
	return ch
}

// msgKey is a message of a project.
type msgKey struct{ project, message int64 }

// gainTarget is a project snapshot: the project and the Unix time.
type gainTarget struct {
	project int64
	at      uint32
}

// A viewColumn is a column of a view as Verify compares it: its name, how
// to read it as text that compares exactly (times as Unix seconds, floats
// as their bits), and how to show that text to a reader.
type viewColumn struct {
	name string
	kind columnKind
}

type columnKind int

const (
	kindNumber columnKind = iota
	kindString
	kindTime  // DateTime, compared as Unix seconds
	kindDate  // Date, as YYYY-MM-DD
	kindFloat // Float64, compared as its bits
	kindNullTime
	kindNullNumber // Nullable number, NULL as the text NULL
	kindNullFloat  // Nullable(Float64), as its bits or NULL
)

// sql is the expression that reads the column as text.
func (c viewColumn) sql() string {
	switch c.kind {
	case kindTime:
		return "toString(toUInt32(" + c.name + "))"
	case kindFloat:
		// 18.16 reinterprets a Float64 as bytes only.
		return "toString(reinterpretAsUInt64(reinterpretAsString(" + c.name + ")))"
	case kindNullTime:
		return "toString(ifNull(toUInt32(" + c.name + "), 0))"
	case kindNullNumber:
		return "ifNull(toString(" + c.name + "), 'NULL')"
	case kindNullFloat:
		return "if(isNull(" + c.name + "), 'NULL', toString(reinterpretAsUInt64(reinterpretAsString(assumeNotNull(" + c.name + ")))))"
	}
	return "toString(" + c.name + ")"
}

// show turns the text of a value of the column into what a reader reads.
func (c viewColumn) show(v string) string {
	switch c.kind {
	case kindTime, kindNullTime:
		if t, err := strconv.ParseUint(v, 10, 32); err == nil {
			if t == 0 && c.kind == kindNullTime {
				return "NULL"
			}
			return sink.Time(t).String()
		}
	case kindFloat, kindNullFloat:
		if b, err := strconv.ParseUint(v, 10, 64); err == nil {
			return strconv.FormatFloat(math.Float64frombits(b), 'g', -1, 64)
		}
	case kindString:
		return strconv.Quote(v)
	}
	return v
}

// viewShape is a view as Verify compares it: the columns that key its
// rows, the others, and the column that places a row in the window.
type viewShape struct {
	name   string
	key    []viewColumn
	values []viewColumn
	// since is the column compared with the window's start.
	since viewColumn
}

var (
	colProject  = viewColumn{"project_id", kindNumber}
	colNFT      = viewColumn{"nft", kindString}
	colName     = viewColumn{"project_name", kindString}
	colSnapshot = viewColumn{"snapshot_at", kindTime}
	colDay      = viewColumn{"day", kindDate}
	colHour     = viewColumn{"hour", kindTime}
	colSchedule = viewColumn{"schedule", kindString}
)

// viewShapes are the views Verify checks, in the order of Views.
var viewShapes = []viewShape{
	{name: schema.LatestView, key: []viewColumn{colProject, {"message_id", kindNumber}},
		values: []viewColumn{colNFT, colName, {"subject", kindString}, colSnapshot, {"read_count", kindNumber}, {"total", kindNumber}, {"percent", kindFloat}},
		since:  colSnapshot},
	{name: schema.DailyView, key: []viewColumn{colProject, colDay},
		values: []viewColumn{colNFT, colName, {"messages", kindNumber}, {"reads", kindNumber}, {"total", kindNumber}, {"read_rate", kindFloat}},
		since:  colDay},
	{name: schema.SnapshotView, key: []viewColumn{colProject, colSnapshot},
		values: []viewColumn{colNFT, colName, {"messages", kindNumber}, {"reads", kindNumber}, {"total", kindNumber}, {"read_rate", kindFloat}},
		since:  colSnapshot},
	{name: schema.GainsView, key: []viewColumn{colProject, colSnapshot},
		values: []viewColumn{colNFT, colName, {"prev_snapshot_at", kindNullTime}, {"messages", kindNumber}, {"new_messages", kindNumber},
			{"reads_gained", kindNumber}, {"missed_ticks", kindNumber}},
		since: colSnapshot},
	{name: schema.DailyGainsView, key: []viewColumn{colProject, colDay},
		values: []viewColumn{colNFT, colName, {"snapshots", kindNumber}, {"new_messages", kindNumber}, {"reads_gained", kindNumber},
			{"missed_ticks", kindNumber}},
		since: colDay},
	{name: schema.HourlyView, key: []viewColumn{colProject, colHour},
		values: []viewColumn{colNFT, colName, {"messages", kindNumber}, {"reads", kindNumber}, {"total", kindNumber}, {"read_rate", kindFloat}},
		since:  colHour},
	{name: schema.HourlyGainsView, key: []viewColumn{colProject, colHour},
		values: []viewColumn{colNFT, colName, {"snapshots", kindNumber}, {"new_messages", kindNumber}, {"reads_gained", kindNumber},
			{"missed_ticks", kindNumber}},
		since: colHour},
	{name: schema.CoverageView, key: []viewColumn{colSchedule, colDay},
		values: []viewColumn{{"ticks_due", kindNumber}, {"ticks_run", kindNumber}, {"ticks_ok", kindNumber}, {"ticks_skipped", kindNumber},
			{"ticks_missed", kindNumber}},
		since: colDay},
}

// reportedShapes are the views a Report holds, in its order: those
// compared a group of projects at a time, those on the message's clock,
// then name_health.
func reportedShapes() []viewShape {
	return append(append(slices.Clip(viewShapes), ageShapes...), nameHealthShape)
}

// viewRows are a view's rows (or their brute force) in a window: the
// values' texts by the key's, each joined with a tab.
type viewRows map[string]string

// ViewDiff is how one view differs from its brute force.
type ViewDiff struct {
	View string
	// Rows is how many rows the brute force has in the window.
	Rows int
	// Missing are the keys of rows the view lacks; Extra those of rows it
	// has and the brute force does not; Wrong those of rows whose values
	// differ: the first KeptDiffs of each, in key order within a step.
	Missing, Extra, Wrong []RowDiff
	// MissingRows, ExtraRows and WrongRows count them all.
	MissingRows, ExtraRows, WrongRows int
	// Projects are the projects of the rows that differ.
	Projects []int64
}

// KeptDiffs is how many rows that differ a ViewDiff keeps of each kind,
// so that a Report stays small whatever the damage it finds; it counts
// the others.
const KeptDiffs = 1000

// note counts a row that differs of a kind, and keeps it if fewer than
// KeptDiffs are kept.
func note(kept *[]RowDiff, count *int, d RowDiff) {
	*count++
	if len(*kept) < KeptDiffs {
		*kept = append(*kept, d)
	}
}

// RowDiff is one row that differs: its key and, as text for a reader,
// what the view holds and what the brute force says.
type RowDiff struct {
	Key       string
	Got, Want string
}

// Differs reports whether the view differs from its brute force.
func (d ViewDiff) Differs() bool { return d.MissingRows+d.ExtraRows+d.WrongRows > 0 }

// Report is what Verify found.
type Report struct {
	// Since is the start of the window: the UTC day from which on the
	// snapshots and days were compared, and what was written.
	Since time.Time
	// Written and Ticks count the project snapshots and the cron ticks
	// taken before Since that the change logs record as written since;
	// Earlier is how many projects they made Verify compare from before
	// Since, the earliest from EarlierFrom on.
	Written, Ticks, Earlier int
	EarlierFrom             time.Time
	Views                   []ViewDiff
	// Expired is the time before which the raw rows expired
	// (READSYNC_RETAIN_RAW), the zero time when none did; Since is then
	// no earlier than its UTC day's end. Given counts the project
	// snapshots whose reads gained, computed from a row that expired,
	// were taken as the views hold them, with their days.
	Expired time.Time
	Given   int
}

// Clean reports whether every view equals its brute force.
func (r Report) Clean() bool {
	for _, v := range r.Views {
		if v.Differs() {
			return false
		}
	}
	return true
}

// Verify compares every view with its brute force for the snapshots and
// days from the UTC day of since on, and for the snapshots and ticks
// written since then whatever their time, with the rows that depend on
// them (see window.go); for the zero time, over the whole history.
// name_health, which shows the last day, is compared over that day.
// It changes nothing; the schema must be current.
func (c *Checker) Verify(ctx context.Context, since time.Time) (Report, error) {
	from := chconn.DayStart(uint32(sink.TimeOf(since)))
	var err error
	if c.edge, err = c.readEdge(ctx); err != nil {
		return Report{}, c.conn.Redact(fmt.Errorf("verify: %w", err))
	}
	var rep Report
	if c.edge > 0 {
		// The days before the first whole one kept were computed from
		// rows of which some expired: taken as given.
		from = max(from, chconn.DayStart(c.edge+86399))
		rep.Expired = sink.Time(c.edge).Time()
	}
	rep.Since = sink.Time(from).Time()
	w, err := c.readWindow(ctx, from)
	if err != nil {
		return rep, c.conn.Redact(fmt.Errorf("verify: %w", err))
	}
	w.report(&rep)
	judged := newComparison()
	if err := c.bruteForce(ctx, w, judged); err != nil {
		return rep, c.conn.Redact(fmt.Errorf("verify: %w", err))
	}
	if err := c.compareNameHealth(ctx, judged); err != nil {
		return rep, c.conn.Redact(fmt.Errorf("verify: %w", err))
	}
	rep.Views = judged.diffs()
	rep.Given = judged.given
	return rep, nil
}

// comparison accumulates how each view differs from its brute force, a
// group of projects at a time, so that what Verify holds is one group's
// rows and the differences, whatever the history it checks.
type comparison struct {
	diffs_   map[string]*ViewDiff
	projects map[string]map[int64]bool
	// given counts the project snapshots taken as given.
	given int
	// stored holds the views a step read as stored (viewFrom).
	stored map[string]bool
}

func newComparison() *comparison {
	c := &comparison{diffs_: map[string]*ViewDiff{}, projects: map[string]map[int64]bool{}, stored: map[string]bool{}}
	for _, shape := range reportedShapes() {
		c.diffs_[shape.name] = &ViewDiff{View: shape.name}
		c.projects[shape.name] = map[int64]bool{}
	}
	return c
}

// add compares got, some of a view's rows, with want, their brute force.
func (c *comparison) add(shape viewShape, got, want viewRows) {
	d := compareRows(shape, got, want)
	acc := c.diffs_[shape.name]
	acc.Rows += d.Rows
	for _, k := range []struct {
		kept, more *[]RowDiff
		count      *int
	}{{&acc.Missing, &d.Missing, &acc.MissingRows}, {&acc.Extra, &d.Extra, &acc.ExtraRows}, {&acc.Wrong, &d.Wrong, &acc.WrongRows}} {
		for _, r := range *k.more {
			note(k.kept, k.count, r)
		}
	}
	for _, p := range d.Projects {
		c.projects[shape.name][p] = true
	}
}

// diffs returns each view's differences, in the order of reportedShapes.
func (c *comparison) diffs() []ViewDiff {
	var out []ViewDiff
	for _, shape := range reportedShapes() {
		d := *c.diffs_[shape.name]
		d.Projects = slices.Sorted(maps.Keys(c.projects[shape.name]))
		sortDiffs(d.Missing)
		sortDiffs(d.Extra)
		sortDiffs(d.Wrong)
		out = append(out, d)
	}
	return out
}

func sortDiffs(ds []RowDiff) {
	slices.SortFunc(ds, func(a, b RowDiff) int { return strings.Compare(a.Key, b.Key) })
}

// compareProjects compares the rows of the project-keyed views for the
// step s, whose window starts at start, with want, their brute force.
func (c *Checker) compareProjects(ctx context.Context, judged *comparison, s step, start uint32, want map[string]viewRows) error {
	// The step's range narrows the read: 18.16 pushes a range into a
	// view's GROUP BY and JOIN, but not an IN of an external table, so
	// without it each step would read the whole of every rollup behind
	// the views.
	filter, ext, err := s.filter(c.names, "project_id")
	if err != nil {
		return err
	}
	for _, shape := range viewShapes {
		if shape.key[0] != colProject {
			continue
		}
		got := viewRows{}
		where := fmt.Sprintf("%s AND %s >= %s", filter, shape.since.name, shape.since.bound(start))
		from, err := c.viewFrom(ctx, judged, shape.name, s)
		if err != nil {
			return err
		}
		if err := c.readViewRows(chconn.WithExternal(ctx, ext...), shape, from, where, got, nil); err != nil {
			return fmt.Errorf("read %s: %w", shape.name, err)
		}
		judged.given += takeGiven(shape, got, want[shape.name])
		judged.add(shape, got, want[shape.name])
	}
	return nil
}

// viewFrom returns what a read of the view name for the step s reads:
// the view. On a server whose reads of a view narrow none of the tables it
// joins by a range over the view (Server.NarrowsJoins), each step would
// read those tables whole: the projects' names, the messages' subjects
// and the speeds, every project's, at every step, so that a check read
// them as many times over as it has steps. There the step reads the view's
// query, as this release defines it, with those reads narrowed to the
// step's projects (schema.ViewQuery), which returns the same rows; but the
// first step of a check to read the view reads it as stored, so that a
// view altered by hand shows in that step's rows.
func (c *Checker) viewFrom(ctx context.Context, judged *comparison, name string, s step) (string, error) {
	table := c.names.Table(name)
	srv, err := c.conn.Server(ctx)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	if srv.NarrowsJoins() || !judged.stored[name] {
		judged.stored[name] = true
		return table, nil
	}
	q, ok := schema.ViewQuery(c.names, name, s.lo, s.hi)
	if !ok {
		return table, nil
	}
	return "(\n" + q + "\n)", nil
}

// takeGiven leaves out of both got and want the rows the brute force
// takes as the view holds them (givenRow), and returns how many of them
// are project snapshots.
func takeGiven(shape viewShape, got, want viewRows) int {
	n := 0
	for k, v := range want {
		if v == givenRow {
			delete(want, k)
			delete(got, k)
			if shape.name == schema.GainsView {
				n++
			}
		}
	}
	return n
}

// readEdge reads the Unix time before which the raw rows expired, from
// the record of expiry (package expiry), 0 when none did.
func (c *Checker) readEdge(ctx context.Context) (uint32, error) {
	var edge uint32
	q := "SELECT toUInt32(max(kept_from)) FROM " + c.names.Table(schema.Expiries) + " WHERE table != '' AND resolution = " + chconn.QuoteString(string(schema.Raw))
	if err := c.conn.QueryRow(ctx, q).Scan(&edge); err != nil {
		return 0, fmt.Errorf("read where the kept history starts from %s: %w", schema.Expiries, err)
	}
	return edge, nil
}

// compareCoverage compares schedule_coverage's rows in the window w with
// coverage, their brute force; the steps compared every other view.
func (c *Checker) compareCoverage(ctx context.Context, judged *comparison, w verifyWindow, coverage viewRows) error {
	for _, shape := range viewShapes {
		if shape.key[0] == colProject {
			continue
		}
		got := viewRows{}
		if err := c.readViewRows(ctx, shape, c.names.Table(shape.name), w.coverageDays("schedule", "day"), got, nil); err != nil {
			return fmt.Errorf("read %s: %w", shape.name, err)
		}
		judged.add(shape, got, coverage)
	}
	return nil
}

// readViewRows puts the rows that where selects from the view, read from
// from (the view, or its query: see viewFrom), into out, those keep holds
// when it is given: it is given each row's columns as text, the key's
// first.
func (c *Checker) readViewRows(ctx context.Context, shape viewShape, from, where string, out viewRows, keep func(cols []string) (bool, error)) error {
	var cols []string
	for _, col := range shape.key {
		cols = append(cols, col.sql())
	}
	keys := len(cols)
	for _, col := range shape.values {
		cols = append(cols, col.sql())
	}
	// 18.16 pushes the window into the view only with this setting.
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s SETTINGS enable_optimize_predicate_expression = 1",
		strings.Join(cols, ", "), from, where)
	vals := make([]string, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	return chconn.QueryEach(ctx, c.conn, q, func(rows driver.Rows) error {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if keep != nil {
			if ok, err := keep(vals); err != nil || !ok {
				return err
			}
		}
		out[strings.Join(vals[:keys], "\t")] = strings.Join(vals[keys:], "\t")
		return nil
	})
}

// compareRows says how got, a view's rows, differs from want, its brute
// force.
func compareRows(shape viewShape, got, want viewRows) ViewDiff {
	d := ViewDiff{View: shape.name, Rows: len(want)}
	projects := map[int64]bool{}
	note := func(key string) {
		if shape.key[0] == colProject {
			p, _, _ := strings.Cut(key, "\t")
			if id, err := strconv.ParseInt(p, 10, 64); err == nil {
				projects[id] = true
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		switch {
		case !ok:
			d.Missing = append(d.Missing, RowDiff{Key: shape.showKey(k), Want: shape.showValues(want[k])})
			note(k)
		case g != want[k]:
			d.Wrong = append(d.Wrong, RowDiff{Key: shape.showKey(k), Got: shape.showValues(g), Want: shape.showValues(want[k])})
			note(k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			d.Extra = append(d.Extra, RowDiff{Key: shape.showKey(k), Got: shape.showValues(got[k])})
			note(k)
		}
	}
	d.Projects = slices.Sorted(maps.Keys(projects))
	return d
}

func (s viewShape) showKey(k string) string { return showColumns(s.key, k) }

func (s viewShape) showValues(v string) string { return showColumns(s.values, v) }

func showColumns(cols []viewColumn, text string) string {
	parts := strings.Split(text, "\t")
	out := make([]string, len(parts))
	for i, p := range parts {
		if i < len(cols) {
			out[i] = cols[i].name + "=" + cols[i].show(p)
		}
	}
	return strings.Join(out, " ")
}
