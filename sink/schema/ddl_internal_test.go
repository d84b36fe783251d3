package schema

import (
	"regexp"
	"testing"

	"github.com/readsync/readsync/sink/chconn"
)

// Names from configuration are quoted so that no character ends the
// quotes: a backtick or a backslash in a cluster's name stays part of the
// name.
func TestQuoteIdent(t *testing.T) {
	d := DDL{Names: chconn.NewNames("d", chconn.Topology{Cluster: "c`; DROP TABLE x; --\\"})}
	want := "CREATE DATABASE IF NOT EXISTS `d` ON CLUSTER `c\\`; DROP TABLE x; --\\\\`"
	if got := d.CreateDatabase(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// lookupRange is the WHERE ViewQuery adds to a lookup, indented as the
// subquery is.
var lookupRange = regexp.MustCompile(`\n *WHERE (id|project_id) BETWEEN -5 AND 7`)

// ViewQuery is the view as stored, with a range on the project in each
// read of a table the view joins by project, and nothing else changed:
// the project-keyed views' lookups, on one server and on a cluster.
func TestViewQueryNarrowsTheLookupsAlone(t *testing.T) {
	for _, topo := range []chconn.Topology{{}, {Cluster: "c"}} {
		n := chconn.NewNames("d", topo)
		narrowed := 0
		for _, v := range currentViews(DDL{Names: n}) {
			got, ok := ViewQuery(n, v.name, -5, 7)
			if !ok {
				t.Errorf("no query of %s", v.name)
				continue
			}
			narrowed += len(lookupRange.FindAllString(got, -1))
			got = lookupRange.ReplaceAllString(got, "")
			if got != v.query {
				t.Errorf("%s, %v: the query differs from the view's beyond its lookups:\n%s\nwant\n%s", v.name, topo, got, v.query)
			}
		}
		// The names of the projects in the seven project views and the
		// speeds; the subjects in the latest and the speeds; the speeds.
		if want := 8 + 2 + 1; narrowed != want {
			t.Errorf("%v: %d lookups narrowed, want %d", topo, narrowed, want)
		}
	}
	if _, ok := ViewQuery(chconn.NewNames("d", chconn.Topology{}), "no_such_view", 1, 2); ok {
		t.Error("a query of a view this release does not define")
	}
}
