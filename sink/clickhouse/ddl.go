package clickhouse

import (
	"fmt"
	"strings"
)

// DefaultReplicaPath is the ZooKeeper path of a replicated table in cluster
// mode unless READSYNC_CLICKHOUSE_REPLICA_PATH says otherwise. The server
// expands the macros itself: {shard} and {replica} from its <macros>,
// {database} and {table} from the statement.
const DefaultReplicaPath = "/clickhouse/tables/{shard}/{database}/{table}"

// Topology is where readsync's tables live. The zero Topology is one
// server, with the tables under the names users query.
type Topology struct {
	// Cluster names a cluster of the server's remote_servers. Set, every
	// DDL runs ON CLUSTER, each data table is a replicated <table>_local on
	// every host, and the user-facing name is a Distributed table over it.
	Cluster string
	// ReplicaPath is the replicated tables' ZooKeeper path; empty means
	// DefaultReplicaPath.
	ReplicaPath string
}

// ddl writes statements for one database and topology: the one place that
// knows what a table is called, and how it is replicated and sharded.
// Migrations build their statements with it, so that each is written once
// for both topologies.
type ddl struct {
	db   string
	topo Topology
}

// clustered reports whether the statements are for a cluster.
func (d ddl) clustered() bool { return d.topo.Cluster != "" }

// onCluster is the ON CLUSTER clause of every DDL statement, or nothing on
// a single server.
func (d ddl) onCluster() string {
	if !d.clustered() {
		return ""
	}
	return " ON CLUSTER " + quoteIdent(d.topo.Cluster)
}

// database is the quoted database name.
func (d ddl) database() string { return quoteIdent(d.db) }

// table is the quoted, qualified name users query and INSERTs go to: the
// Distributed table in cluster mode, the table itself otherwise.
func (d ddl) table(name string) string { return quoteIdent(d.db) + "." + quoteIdent(name) }

// localName is the name of the table that holds a data table's rows on
// each host: <name>_local in cluster mode, name itself otherwise.
func (d ddl) localName(name string) string {
	if d.clustered() {
		return name + "_local"
	}
	return name
}

// local is localName quoted and qualified. Statements that must act on
// the stored rows (ALTER, a materialized view's source or target) use it.
func (d ddl) local(name string) string { return d.table(d.localName(name)) }

// engine is e as this topology stores it: the Replicated form of the
// engine, at the replica path, in cluster mode.
func (d ddl) engine(e engine) string {
	if !d.clustered() {
		return e.name + "(" + e.args + ")"
	}
	args := []string{quoteString(d.replicaPath()), "'{replica}'"}
	if e.args != "" {
		args = append(args, e.args)
	}
	return "Replicated" + e.name + "(" + strings.Join(args, ", ") + ")"
}

func (d ddl) replicaPath() string {
	if d.topo.ReplicaPath == "" {
		return DefaultReplicaPath
	}
	return d.topo.ReplicaPath
}

// finalVersion is what a SELECT … FINAL adds to its columns. Through a
// Distributed table over several shards, 18.16 fails a FINAL read that
// does not select the version column ("Cannot find column version in
// source stream"), so in cluster mode such a read selects it; on a single
// server the statement stays as the first release wrote it.
func (d ddl) finalVersion() string {
	if !d.clustered() {
		return ""
	}
	return ", version"
}

// createDatabase creates the database on every host.
func (d ddl) createDatabase() string {
	return "CREATE DATABASE IF NOT EXISTS " + d.database() + d.onCluster()
}

// createTable returns the statements that create t: the table itself on a
// single server; in cluster mode, the replicated local table on every host
// and the Distributed table over it, sharded by t's shardBy.
func (d ddl) createTable(t tableDef) []string {
	cols := make([]string, len(t.columns))
	for i, c := range t.columns {
		cols[i] = "    " + c.name + " " + c.typ
	}
	body := "(\n" + strings.Join(cols, ",\n") + "\n)"
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s%s %s ENGINE = %s", d.local(t.name), d.onCluster(), body, d.engine(t.layout.engine))
	if t.layout.partitionBy != "" {
		fmt.Fprintf(&b, "\nPARTITION BY %s", t.layout.partitionBy)
	}
	fmt.Fprintf(&b, "\nORDER BY %s", t.layout.orderBy)
	stmts := []string{b.String()}
	if d.clustered() {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s %s ENGINE = Distributed(%s, %s, %s, cityHash64(%s))",
			d.table(t.name), d.onCluster(), body, quoteIdent(d.topo.Cluster), d.database(), quoteIdent(d.localName(t.name)), t.layout.shardBy))
	}
	return stmts
}

// createView creates a view on every host; its query reads the
// user-facing (in cluster mode, Distributed) tables.
func (d ddl) createView(name, query string) string {
	return fmt.Sprintf("CREATE VIEW IF NOT EXISTS %s%s AS\n%s", d.table(name), d.onCluster(), query)
}

// replaceView drops the view v, if it exists, and creates it again: the
// way to change a view's query that both tested servers have (18.16 has no
// CREATE OR REPLACE VIEW). Readers see no view for the moment between.
func (d ddl) replaceView(v view) []string {
	return []string{
		"DROP TABLE IF EXISTS " + d.table(v.name) + d.onCluster(),
		fmt.Sprintf("CREATE VIEW %s%s AS\n%s", d.table(v.name), d.onCluster(), v.query),
	}
}

// quoteIdent quotes a name for ClickHouse. Names come from configuration
// (the database, the cluster), so a backtick or backslash in one is
// escaped rather than ending the quotes.
func quoteIdent(s string) string {
	return "`" + strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(s) + "`"
}

// quoteString quotes a string literal for ClickHouse.
func quoteString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
