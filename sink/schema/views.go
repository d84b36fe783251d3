package schema

import (
	"fmt"
	"strings"

	"github.com/readsync/readsync/sink/chconn"
)

// The views users query. They follow rules both tested servers share:
//
//   - One JOIN per SELECT, hence the nesting: 18.16 allows no more.
//   - Every joined subquery has an alias: current releases refuse one
//     without (joined_subquery_requires_alias, on by default). Join is the
//     one place that writes a JOIN.
//   - An alias is never the name of a column the same SELECT reads: 18.16
//     substitutes an alias wherever its name appears, so argMax(read_count,
//     …) AS read_count would be cyclic there. Hence last_read_count and the
//     rollups' own column names.
//   - Columns are named, never *: over a JOIN … USING, 18.16 returns the
//     right side's key columns too.
//
// The small lookup tables are read with FINAL; the snapshot history never
// is.

// Names of the views.
const (
	LatestView = "message_read_latest"
	DailyView  = "project_read_daily"
	// SnapshotView is the view of read rate per project at each snapshot.
	SnapshotView = "project_read_snapshots"
	// GainsView is the view of reads gained per project and snapshot.
	GainsView = "project_read_gains"
	// DailyGainsView is the view of reads gained per project and UTC day.
	DailyGainsView = "project_read_daily_gains"
)

// anyLeftJoin returns the FROM clause that joins the subquery right to the
// subquery left by the columns using: each row of left with the first
// matching row of right, or defaults when none matches.
func anyLeftJoin(left, right, using string) string { return Join("ANY LEFT", left, right, using) }

// Join returns the FROM clause that joins the subquery right to the
// subquery left by the columns using, with the JOIN of kind (such as ANY
// LEFT or ALL INNER): the one place that writes a JOIN.
func Join(kind, left, right, using string) string {
	return fmt.Sprintf("(\n%s\n) AS l\n%s JOIN\n(\n%s\n) AS r USING (%s)", indent(left), kind, indent(right), using)
}

// indent indents every line of q by four spaces.
func indent(q string) string {
	return "    " + strings.ReplaceAll(q, "\n", "\n    ")
}

// withProject returns the FROM clause that adds the project's nft and name
// to the rows of the subquery left, by project_id.
func withProject(d DDL, left string) string {
	right := fmt.Sprintf("SELECT id AS project_id, nft, name AS project_name%s\nFROM %s FINAL%s", d.FinalVersion(), d.Table(ProjectsTable.name), d.lookupsWhere("id"))
	return anyLeftJoin(left, right, "project_id")
}

// withSubject returns the FROM clause that adds each message's subject to
// the rows of the subquery left, by project_id and message_id.
func withSubject(d DDL, left string) string {
	right := fmt.Sprintf("SELECT project_id, id AS message_id, subject%s\nFROM %s FINAL%s", d.FinalVersion(), d.Table(MessagesTable.name), d.lookupsWhere("project_id"))
	return anyLeftJoin(left, right, "project_id, message_id")
}

// readRate is a view's read rate column: reads over total, 0 for none.
const readRate = "if(total = 0, 0, reads / total) AS read_rate"

// view is a view's name and query.
type view struct{ name, query string }

// Views are the names of the views users query, the dashboards' sources,
// in the order readsync reports on them.
func Views() []string {
	return []string{LatestView, DailyView, SnapshotView, GainsView, DailyGainsView, CoverageView, HourlyView, HourlyGainsView, ByAgeView, SpeedView, ProjectByAgeView}
}

// currentViews are the views users query, as this release defines them.
func currentViews(d DDL) []view {
	v := rollupViews(d)
	v[2] = view{SnapshotView, snapshotsFromGains(d)}
	return append(append(append(append(v, gainsViews(d)...), view{CoverageView, scheduleCoverage(d)}, view{NameHealthView, nameHealth(d)}), hourlyViews(d)...), ageViews(d)...)
}

// ViewQuery returns the query of the view name as this release defines
// it, with its reads of the tables it joins by project (the projects'
// names, the messages' subjects, the speeds' newest computations) narrowed
// to the project ids from lo to hi, and false for a view it does not
// define. A range in a WHERE over the view narrows its grouped reads, but
// 18.16 pushes it into no joined subquery: there each read of a view, for
// however few projects, reads those tables whole, and this query, for
// the projects of the range, returns the view's rows of them without.
func ViewQuery(n chconn.Names, name string, lo, hi int64) (string, bool) {
	for _, v := range currentViews(DDL{Names: n, lookups: &idRange{lo, hi}}) {
		if v.name == name {
			return v.query, true
		}
	}
	return "", false
}

// RewriteView returns the statements that write the view name again from
// this release's definition of it: what mends a view altered by hand.
func RewriteView(n chconn.Names, name string) []string {
	d := DDL{Names: n}
	for _, v := range currentViews(d) {
		if v.name == name {
			return d.replaceView(v)
		}
	}
	return d.replaceView(view{name: name})
}
