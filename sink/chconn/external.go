package chconn

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	chcolumn "github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/readsync/readsync/sink"
)

// The lists a refresh works on (projects, project snapshots, project days,
// messages) go to the server as external data: tables sent with the
// query, which it reads as if they were its own. A statement's text then
// stays the same size whatever the batch, where a list written into it
// grows with the batch until the server refuses it (max_query_size, 256
// KiB by default: about 16 000 project days). Names.InExt renders the
// condition on one.

// ExtTable is an external table being filled: its name in the query and
// its rows.
type ExtTable struct {
	t *ext.Table
}

// NewExtTable starts an external table; columns alternate names and
// types.
func NewExtTable(name string, columns ...string) (*ExtTable, error) {
	var cols []func(*ext.Table) error
	for i := 0; i+1 < len(columns); i += 2 {
		cols = append(cols, ext.Column(columns[i], chcolumn.Type(columns[i+1])))
	}
	t, err := ext.NewTable(name, cols...)
	if err != nil {
		return nil, fmt.Errorf("external table %s: %w", name, err)
	}
	return &ExtTable{t: t}, nil
}

// Append adds a row of values, one per column.
func (e *ExtTable) Append(values ...any) error {
	if err := e.t.Append(values...); err != nil {
		return fmt.Errorf("external table %s: %w", e.t.Name(), err)
	}
	return nil
}

// WithExternal returns ctx with the tables sent along with its query.
func WithExternal(ctx context.Context, tables ...*ExtTable) context.Context {
	ts := make([]*ext.Table, len(tables))
	for i, t := range tables {
		ts[i] = t.t
	}
	return clickhouse.Context(ctx, clickhouse.WithExternalTable(ts...))
}

// ProjectsExt is the external table name of projects: one column,
// project_id, in order.
func ProjectsExt(name string, projects []int64) (*ExtTable, error) {
	t, err := NewExtTable(name, "project_id", "Int64")
	if err != nil {
		return nil, err
	}
	for _, p := range projects {
		if err := t.Append(p); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// SnapshotsExt is the external table name of project snapshots: project_id
// and snapshot_at, in order.
func SnapshotsExt(name string, set SnapshotSet) (*ExtTable, error) {
	t, err := NewExtTable(name, "project_id", "Int64", "snapshot_at", "DateTime")
	if err != nil {
		return nil, err
	}
	for _, s := range set.sorted() {
		if err := t.Append(s.project, sink.Time(s.at).Time()); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// DaysExt is the external table name of project days: project_id and day,
// in order.
func DaysExt(name string, days map[ProjectDay]bool) (*ExtTable, error) {
	return PeriodsExt(name, Day, days)
}

// PeriodsExt is an external table of project periods of p: project_id,
// and the period's column (day or hour).
func PeriodsExt(name string, p Period, keys map[ProjectDay]bool) (*ExtTable, error) {
	t, err := NewExtTable(name, "project_id", "Int64", p.Column(), p.Type())
	if err != nil {
		return nil, err
	}
	for _, pd := range slices.SortedFunc(maps.Keys(keys), ProjectDay.Compare) {
		if err := t.Append(pd.Project, sink.Time(p.Start(pd.Day)).Time()); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// SnapshotsIn returns the external tables and the condition that select
// the rows of exactly the project snapshots of set, which must not be
// empty, from a table whose sort key starts (project_id, snapshot_at):
// the projects, then the range of their times, then the pairs. Both
// servers narrow a read by the pairs' key prefix (the granules around each
// pair), and the range prunes the partitions by time. name prefixes the
// external tables' names.
func (n Names) SnapshotsIn(name string, set SnapshotSet) ([]*ExtTable, string, error) {
	pt, err := ProjectsExt(name+"_projects", set.Projects())
	if err != nil {
		return nil, "", err
	}
	st, err := SnapshotsExt(name, set)
	if err != nil {
		return nil, "", err
	}
	lo, hi := set.Span()
	return []*ExtTable{pt, st}, fmt.Sprintf("%s AND snapshot_at >= %s AND snapshot_at <= %s AND %s",
		n.InExt("project_id", name+"_projects"), DateTime(lo), DateTime(hi), n.InExt("project_id, snapshot_at", name)), nil
}

// InExt is the condition that the columns, a name or a tuple such as
// "project_id, snapshot_at", are a row of the external table of that name.
// On one server it is a plain IN, by which both tested releases narrow a
// read to the granules of the rows it names; 18.16 narrows nothing by a
// GLOBAL IN (checked with its query log: a GLOBAL IN of two project
// snapshots read a 10M-row table whole, the plain IN three granules). In
// cluster mode it is a GLOBAL IN, which ships the table to every shard
// the Distributed table reads.
func (n Names) InExt(columns, table string) string {
	in := "IN"
	if n.Clustered() {
		in = "GLOBAL IN"
	}
	if strings.Contains(columns, ",") {
		return fmt.Sprintf("(%s) %s (SELECT %s FROM %s)", columns, in, columns, table)
	}
	return fmt.Sprintf("%s %s (SELECT %s FROM %s)", columns, in, columns, table)
}

// SnapshotSet is a set of project snapshots, Unix times by project: what a
// refresh recomputes.
type SnapshotSet map[int64]map[uint32]bool

// Add puts project p's snapshot at the Unix time at into s.
func (s SnapshotSet) Add(p int64, at uint32) {
	if s[p] == nil {
		s[p] = map[uint32]bool{}
	}
	s[p][at] = true
}

// Has reports whether s holds project p's snapshot at at.
func (s SnapshotSet) Has(p int64, at uint32) bool { return s[p][at] }

// AddAll puts the project snapshots of o into s.
func (s SnapshotSet) AddAll(o SnapshotSet) {
	for p, ats := range o {
		for at := range ats {
			s.Add(p, at)
		}
	}
}

// Len is how many project snapshots s holds.
func (s SnapshotSet) Len() int {
	n := 0
	for _, ats := range s {
		n += len(ats)
	}
	return n
}

// Span returns the earliest and the latest time in s, which must not be
// empty.
func (s SnapshotSet) Span() (lo, hi uint32) {
	lo = ^uint32(0)
	for _, ats := range s {
		for at := range ats {
			lo, hi = min(lo, at), max(hi, at)
		}
	}
	return lo, hi
}

// Projects lists the projects of s in order.
func (s SnapshotSet) Projects() []int64 { return slices.Sorted(maps.Keys(s)) }

// projectSnapshot is a project's snapshot: the project and the Unix time.
type projectSnapshot struct {
	project int64
	at      uint32
}

// sorted lists the project snapshots of s by project, then time.
func (s SnapshotSet) sorted() []projectSnapshot {
	out := make([]projectSnapshot, 0, s.Len())
	for _, p := range s.Projects() {
		for _, at := range slices.Sorted(maps.Keys(s[p])) {
			out = append(out, projectSnapshot{p, at})
		}
	}
	return out
}

// Days returns the UTC days of s's snapshots.
func (s SnapshotSet) Days() map[ProjectDay]bool { return s.Periods(Day) }

// Periods returns the project periods of p of the snapshots of s.
func (s SnapshotSet) Periods(p Period) map[ProjectDay]bool {
	out := map[ProjectDay]bool{}
	for project, ats := range s {
		for at := range ats {
			out[ProjectDay{Project: project, Day: p.Of(at)}] = true
		}
	}
	return out
}
