package clickhouse

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

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
// KiB by default: about 16 000 project days). GLOBAL IN ships such a
// table to every shard of a cluster; on one server it is a plain IN, and
// both tested releases use it to narrow a read by the primary key.

// extTable is an external table being filled: its name in the query and
// its rows.
type extTable struct {
	t *ext.Table
}

// newExtTable starts an external table; columns alternate names and
// types.
func newExtTable(name string, columns ...string) (*extTable, error) {
	var cols []func(*ext.Table) error
	for i := 0; i+1 < len(columns); i += 2 {
		cols = append(cols, ext.Column(columns[i], chcolumn.Type(columns[i+1])))
	}
	t, err := ext.NewTable(name, cols...)
	if err != nil {
		return nil, fmt.Errorf("external table %s: %w", name, err)
	}
	return &extTable{t: t}, nil
}

func (e *extTable) append(values ...any) error {
	if err := e.t.Append(values...); err != nil {
		return fmt.Errorf("external table %s: %w", e.t.Name(), err)
	}
	return nil
}

// withExternal returns ctx with the tables sent along with its query.
func withExternal(ctx context.Context, tables ...*extTable) context.Context {
	ts := make([]*ext.Table, len(tables))
	for i, t := range tables {
		ts[i] = t.t
	}
	return clickhouse.Context(ctx, clickhouse.WithExternalTable(ts...))
}

// projectsExt is the external table name of projects: one column,
// project_id, in order.
func projectsExt(name string, projects []int64) (*extTable, error) {
	t, err := newExtTable(name, "project_id", "Int64")
	if err != nil {
		return nil, err
	}
	for _, p := range projects {
		if err := t.append(p); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// snapshotsExt is the external table name of project snapshots: project_id
// and snapshot_at, in order.
func snapshotsExt(name string, set snapshotSet) (*extTable, error) {
	t, err := newExtTable(name, "project_id", "Int64", "snapshot_at", "DateTime")
	if err != nil {
		return nil, err
	}
	for _, s := range set.sorted() {
		if err := t.append(s.project, sink.Time(s.at).Time()); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// daysExt is the external table name of project days: project_id and day,
// in order.
func daysExt(name string, days map[projectDay]bool) (*extTable, error) {
	t, err := newExtTable(name, "project_id", "Int64", "day", "Date")
	if err != nil {
		return nil, err
	}
	for _, pd := range slices.SortedFunc(maps.Keys(days), projectDay.compare) {
		if err := t.append(pd.project, sink.Time(pd.day*86400).Time()); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// inExt is the condition that the columns, a name or a tuple such as
// "project_id, snapshot_at", are a row of the external table of that name.
func inExt(columns, table string) string {
	if strings.Contains(columns, ",") {
		return fmt.Sprintf("(%s) GLOBAL IN (SELECT %s FROM %s)", columns, columns, table)
	}
	return fmt.Sprintf("%s GLOBAL IN (SELECT %s FROM %s)", columns, columns, table)
}

// snapshotSet is a set of project snapshots, Unix times by project: what a
// refresh recomputes.
type snapshotSet map[int64]map[uint32]bool

func (s snapshotSet) add(p int64, at uint32) {
	if s[p] == nil {
		s[p] = map[uint32]bool{}
	}
	s[p][at] = true
}

func (s snapshotSet) has(p int64, at uint32) bool { return s[p][at] }

func (s snapshotSet) addAll(o snapshotSet) {
	for p, ats := range o {
		for at := range ats {
			s.add(p, at)
		}
	}
}

// len is how many project snapshots s holds.
func (s snapshotSet) len() int {
	n := 0
	for _, ats := range s {
		n += len(ats)
	}
	return n
}

// projects lists the projects of s in order.
func (s snapshotSet) projects() []int64 { return slices.Sorted(maps.Keys(s)) }

// sorted lists the project snapshots of s by project, then time.
func (s snapshotSet) sorted() []gainTarget {
	out := make([]gainTarget, 0, s.len())
	for _, p := range s.projects() {
		for _, at := range slices.Sorted(maps.Keys(s[p])) {
			out = append(out, gainTarget{p, at})
		}
	}
	return out
}

// days returns the UTC days of s's snapshots.
func (s snapshotSet) days() map[projectDay]bool {
	out := map[projectDay]bool{}
	for p, ats := range s {
		for at := range ats {
			out[projectDay{p, dayOf(at)}] = true
		}
	}
	return out
}

// writtenSnapshots is the set of project snapshots of rows just written.
func writtenSnapshots(snaps []sink.Snapshot) snapshotSet {
	s := snapshotSet{}
	for i := range snaps {
		s.add(snaps[i].ProjectID, uint32(snaps[i].SnapshotAt))
	}
	return s
}

// dateTime writes the Unix time t as a DateTime literal.
func dateTime(t uint32) string { return fmt.Sprintf("toDateTime(%d)", t) }

// quoteDate writes t's UTC day as a Date literal.
func quoteDate(t time.Time) string { return "toDate('" + t.UTC().Format(time.DateOnly) + "')" }
