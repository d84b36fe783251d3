package chconn

import "strings"

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

// Names names readsync's tables for one database and topology: the one
// place that knows what a table is called, and how it is replicated.
// Statements are built with it, so that each is written once for both
// topologies. It is a value: rendering a statement needs no server.
type Names struct {
	db   string
	topo Topology
}

// NewNames returns the names of the tables of database db on topo.
func NewNames(db string, topo Topology) Names { return Names{db: db, topo: topo} }

// Database is the database's name, unquoted.
func (n Names) Database() string { return n.db }

// Topology is where the tables live.
func (n Names) Topology() Topology { return n.topo }

// Clustered reports whether the tables live on a cluster.
func (n Names) Clustered() bool { return n.topo.Cluster != "" }

// OnCluster is the ON CLUSTER clause of every DDL statement, or nothing on
// a single server.
func (n Names) OnCluster() string {
	if !n.Clustered() {
		return ""
	}
	return " ON CLUSTER " + QuoteIdent(n.topo.Cluster)
}

// QuotedDatabase is the quoted database name.
func (n Names) QuotedDatabase() string { return QuoteIdent(n.db) }

// Table is the quoted, qualified name users query and INSERTs go to: the
// Distributed table in cluster mode, the table itself otherwise.
func (n Names) Table(name string) string { return QuoteIdent(n.db) + "." + QuoteIdent(name) }

// LocalName is the name of the table that holds a data table's rows on
// each host: <name>_local in cluster mode, name itself otherwise. One
// exception: in a cluster database that package resort moved onto the
// snapshot table's new sort key, message_read_snapshots reads
// message_read_snapshots_resorted_local (its doc says why); a
// statement that must act on those rows after the move reads the name
// from the Distributed table.
func (n Names) LocalName(name string) string {
	if n.Clustered() {
		return name + "_local"
	}
	return name
}

// Local is LocalName quoted and qualified. Statements that must act on
// the stored rows (ALTER, a materialized view's source or target) use it.
func (n Names) Local(name string) string { return n.Table(n.LocalName(name)) }

// Engine is the MergeTree-family engine name with its arguments args
// (empty for none) as this topology stores it: its Replicated form, at the
// replica path, in cluster mode.
func (n Names) Engine(name, args string) string {
	if !n.Clustered() {
		return name + "(" + args + ")"
	}
	list := []string{QuoteString(n.ReplicaPath()), "'{replica}'"}
	if args != "" {
		list = append(list, args)
	}
	return "Replicated" + name + "(" + strings.Join(list, ", ") + ")"
}

// ReplicaPath is the replicated tables' ZooKeeper path.
func (n Names) ReplicaPath() string {
	if n.topo.ReplicaPath == "" {
		return DefaultReplicaPath
	}
	return n.topo.ReplicaPath
}

// DistributedLocal reads the local table out of a Distributed table's
// engine_full, Distributed(cluster, database, table[, sharding key]): the
// table that holds its rows on each host.
func DistributedLocal(engine string) (string, bool) {
	args, ok := strings.CutPrefix(engine, "Distributed(")
	if !ok {
		return "", false
	}
	parts := strings.SplitN(args, ",", 4)
	if len(parts) < 3 {
		return "", false
	}
	return strings.Trim(strings.TrimSuffix(strings.TrimSpace(parts[2]), ")"), "'`\""), true
}
