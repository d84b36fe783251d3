package schema

import (
	"fmt"
	"strings"

	"github.com/readsync/readsync/sink/chconn"
)

// DDL writes the DDL of readsync's schema for one database and topology,
// naming the tables as chconn.Names does. Migrations build their
// statements with it, so that each is written once for both topologies,
// and none needs a server to render: the functions of this package that
// take a DDL (RollupTablesDDL and the like) render what each migration
// creates.
type DDL struct {
	chconn.Names
	// lookups, when set, narrows the reads of the small tables a view
	// joins by project (see ViewQuery); the views stored never have it.
	lookups *idRange
}

// idRange is the project ids from lo to hi.
type idRange struct{ lo, hi int64 }

// lookupsWhere returns the WHERE clause that narrows a view's read of a
// table joined by project to the ids of d's lookups, by its column col,
// and nothing when d has none.
func (d DDL) lookupsWhere(col string) string {
	if d.lookups == nil {
		return ""
	}
	return fmt.Sprintf("\nWHERE %s BETWEEN %d AND %d", col, d.lookups.lo, d.lookups.hi)
}

// in is the IN of a view's subquery over readsync's tables: a plain IN
// on one server, by which 18.16 narrows a read to the granules of the keys
// the subquery returns (it narrows nothing by a GLOBAL IN); in cluster
// mode a GLOBAL IN, which runs the subquery once, over the Distributed
// tables, rather than once per shard.
func (d DDL) in() string {
	if d.Clustered() {
		return "GLOBAL IN"
	}
	return "IN"
}

// CreateDatabase creates the database on every host.
func (d DDL) CreateDatabase() string {
	return "CREATE DATABASE IF NOT EXISTS " + d.QuotedDatabase() + d.OnCluster()
}

// CreateTable returns the statements that create t: the table itself on a
// single server; in cluster mode, the replicated local table on every host
// and the Distributed table over it, sharded by t's shardBy.
func (d DDL) CreateTable(t TableDef) []string {
	cols := make([]string, 0, len(t.columns)+len(t.aliases))
	for _, c := range t.columns {
		cols = append(cols, "    "+c.Name+" "+c.Type)
	}
	for _, c := range t.aliases {
		cols = append(cols, "    "+c.name+" "+c.typ+" ALIAS "+c.expr)
	}
	body := "(\n" + strings.Join(cols, ",\n") + "\n)"
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s%s %s ENGINE = %s", d.Local(t.name), d.OnCluster(), body, d.Engine(t.layout.engine.name, t.layout.engine.args))
	if t.layout.partitionBy != "" {
		fmt.Fprintf(&b, "\nPARTITION BY %s", t.layout.partitionBy)
	}
	fmt.Fprintf(&b, "\nORDER BY %s", t.layout.orderBy)
	if t.layout.granularity > 0 {
		fmt.Fprintf(&b, "\nSETTINGS index_granularity = %d", t.layout.granularity)
	}
	stmts := []string{b.String()}
	if d.Clustered() {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s %s ENGINE = Distributed(%s, %s, %s, cityHash64(%s))",
			d.Table(t.name), d.OnCluster(), body, chconn.QuoteIdent(d.Topology().Cluster), d.QuotedDatabase(), chconn.QuoteIdent(d.LocalName(t.name)), t.layout.shardBy))
	}
	return stmts
}

// CreateView creates a view on every host; its query reads the
// user-facing (in cluster mode, Distributed) tables.
func (d DDL) CreateView(name, query string) string {
	return fmt.Sprintf("CREATE VIEW IF NOT EXISTS %s%s AS\n%s", d.Table(name), d.OnCluster(), query)
}

// replaceView drops the view v, if it exists, and creates it again: the
// way to change a view's query that both tested servers have (18.16 has no
// CREATE OR REPLACE VIEW). Readers see no view for the moment between.
func (d DDL) replaceView(v view) []string {
	return []string{
		"DROP TABLE IF EXISTS " + d.Table(v.name) + d.OnCluster(),
		fmt.Sprintf("CREATE VIEW %s%s AS\n%s", d.Table(v.name), d.OnCluster(), v.query),
	}
}
