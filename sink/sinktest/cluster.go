package sinktest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// EnvClusterDSNs names the variable holding the test cluster's native DSNs,
// one per node, comma-separated. `make test` sets it after starting the
// cluster with scripts/cluster.sh.
const EnvClusterDSNs = "READSYNC_TEST_CLUSTER_DSNS"

// Topologies of the test cluster. Both are defined on the same two nodes
// (see scripts/cluster.sh).
const (
	Replicated = "replicated" // cluster readsync_replicated: one shard, two replicas
	Sharded    = "sharded"    // cluster readsync_sharded: two shards, one replica each
)

// clusterNodes is how many nodes both topologies span.
const clusterNodes = 2

// topology returns the cluster name and replica path of a topology. The
// macros {shard} and {replica} belong to a node, not to a cluster: node 1
// is shard 01 and node 2 shard 02 in both clusters, so the one-shard
// topology must leave {shard} out of its path, or its two replicas would
// register under two different tables.
func topology(name string) (cluster, replicaPath string, ok bool) {
	switch name {
	case Replicated:
		return "readsync_replicated", "/clickhouse/tables/replicated/{database}/{table}", true
	case Sharded:
		return "readsync_sharded", "/clickhouse/tables/{shard}/{database}/{table}", true
	}
	return "", "", false
}

// Cluster is a database name reserved for one test on the two-node test
// cluster. NewCluster does not create the database (that is the code under
// test's job, ON CLUSTER); the test's cleanup drops it on every node.
type Cluster struct {
	// Name is the cluster's name in remote_servers, e.g. "readsync_sharded".
	Name string
	// ReplicaPath is the replica path readsync must use for this topology.
	ReplicaPath string
	// Database is a fresh, unique database name for this test (not created).
	Database string
	// DSNs holds the native DSN of each node, naming Database.
	DSNs []string
	// Conns holds one connection per node, naming no database, for reading
	// rows back; they are closed for you.
	Conns []driver.Conn

	exclusive bool
	stopped   []bool
}

// ClusterOption changes what NewCluster sets up.
type ClusterOption func(*clusterOptions)

type clusterOptions struct{ exclusive bool }

// Exclusive marks a test that stops nodes: no other cluster test, in this
// package or another, runs while it holds the cluster. Only an Exclusive
// Cluster may StopNode. A test must not hold another Cluster while it asks
// for an Exclusive one: it would wait for itself.
func Exclusive() ClusterOption {
	return func(o *clusterOptions) { o.exclusive = true }
}

// NewCluster reserves a unique database name on the test cluster in the
// given topology (Replicated or Sharded), connects to every node, and
// registers with t.Cleanup the database's removal from every node and the
// connections' closing. It skips the test when READSYNC_TEST_CLUSTER_DSNS
// is unset, and fails it instead when READSYNC_REQUIRE_CLUSTER=1.
func NewCluster(t testing.TB, topo string, opts ...ClusterOption) *Cluster {
	t.Helper()
	raw := baseFromEnv(t, EnvClusterDSNs, "READSYNC_REQUIRE_CLUSTER", "ClickHouse cluster")
	name, path, ok := topology(topo)
	if !ok {
		t.Fatalf("NewCluster: topology %q: want %q or %q", topo, Replicated, Sharded)
	}
	var o clusterOptions
	for _, opt := range opts {
		opt(&o)
	}
	bases := strings.Split(raw, ",")
	if len(bases) != clusterNodes {
		t.Fatalf("%s: %d DSNs, want %d (one per node, comma-separated)", EnvClusterDSNs, len(bases), clusterNodes)
	}

	lockCluster(t, raw, o.exclusive)

	c := &Cluster{
		Name:        name,
		ReplicaPath: path,
		Database:    uniqueDatabase(),
		exclusive:   o.exclusive,
		stopped:     make([]bool, len(bases)),
	}
	for i, base := range bases {
		conn, dsn := connect(t, fmt.Sprintf("%s node %d", EnvClusterDSNs, i), strings.TrimSpace(base), c.Database)
		c.Conns = append(c.Conns, conn)
		c.DSNs = append(c.DSNs, dsn)
	}
	t.Cleanup(func() { c.drop(t) })
	return c
}

// drop removes the database from every node. ON CLUSTER goes through the
// distributed DDL queue, behind any statement of the test that a node
// restarted by StartNode has yet to run, so the node cannot recreate the
// database after it was dropped. Should the queue fail, each node drops
// its own copy.
func (c *Cluster) drop(t testing.TB) {
	if os.Getenv("READSYNC_KEEP_TEST_DB") == "1" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q := "DROP DATABASE IF EXISTS " + quote(c.Database)
	err := c.Conns[0].Exec(ctx, q+" ON CLUSTER "+quote(c.Name))
	if err == nil {
		return
	}
	t.Logf("drop test database on cluster %s: %v; dropping it on each node", c.Name, err)
	for i, conn := range c.Conns {
		if err := conn.Exec(ctx, q); err != nil {
			t.Logf("drop test database on node %d: %v", i, err)
		}
	}
}

// Table returns the quoted, database-qualified name of a table in Database.
func (c *Cluster) Table(name string) string { return quote(c.Database) + "." + quote(name) }

// SyncReplica waits until the replica of table (in Database) on node, 0-based,
// has fetched every part the other replicas have (SYSTEM SYNC REPLICA), so
// that a test reads what was written elsewhere without sleeping.
func (c *Cluster) SyncReplica(t testing.TB, node int, table string) {
	t.Helper()
	c.checkNode(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Conns[node].Exec(ctx, "SYSTEM SYNC REPLICA "+c.Table(table)); err != nil {
		t.Fatalf("sync replica %s on node %d: %v", table, node, err)
	}
}

// StopNode stops node i (0-based) of the cluster; the Cluster must be
// Exclusive. The node is started again when the test ends, if the test has
// not done so itself.
func (c *Cluster) StopNode(t testing.TB, i int) {
	t.Helper()
	c.checkNode(t, i)
	if !c.exclusive {
		t.Fatalf("StopNode: the cluster is shared with other tests; create it with NewCluster(t, topology, sinktest.Exclusive())")
	}
	if !c.stopped[i] {
		// Registered before stopping: a stop that half-failed still restarts.
		t.Cleanup(func() {
			if c.stopped[i] {
				c.StartNode(t, i)
			}
		})
	}
	c.stopped[i] = true
	runScript(t, "stop-node", strconv.Itoa(i+1))
}

// StartNode starts node i (0-based) of the cluster and waits until it
// answers queries.
func (c *Cluster) StartNode(t testing.TB, i int) {
	t.Helper()
	c.checkNode(t, i)
	runScript(t, "start-node", strconv.Itoa(i+1))
	c.stopped[i] = false
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Conns[i].Ping(ctx); err != nil {
		t.Fatalf("node %d started but does not answer: %v", i, err)
	}
}

func (c *Cluster) checkNode(t testing.TB, i int) {
	t.Helper()
	if i < 0 || i >= len(c.Conns) {
		t.Fatalf("node %d: the cluster has nodes 0 to %d", i, len(c.Conns)-1)
	}
}

// runScript runs scripts/cluster.sh with args, which manages the nodes that
// `make test` started.
func runScript(t testing.TB, args ...string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("find scripts/cluster.sh: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script := filepath.Join(root, "scripts", "cluster.sh")
	out, err := exec.CommandContext(ctx, script, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", script, strings.Join(args, " "), err, out)
	}
}

// moduleRoot walks up from the working directory (a package's directory
// under `go test`) to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in the working directory or above")
		}
		dir = parent
	}
}

// lockCluster takes a lock on the cluster for the rest of the test: shared
// for ordinary tests, exclusive for one that stops nodes. It is a file lock
// because `go test ./...` runs packages in separate processes; the file is
// named after the DSNs, so that two clusters do not wait for each other.
// flock locks belong to an open file, so tests of one process exclude each
// other the same way.
func lockCluster(t testing.TB, dsns string, exclusive bool) {
	t.Helper()
	sum := sha256.Sum256([]byte(dsns))
	path := filepath.Join(os.TempDir(), "readsync-test-cluster-"+hex.EncodeToString(sum[:8])+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatalf("cluster lock: %v", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	// Try first, so that a wait is visible in the test's log.
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		t.Logf("waiting for the cluster lock %s (exclusive: %v)", path, exclusive)
		if err := flockRetry(f, how); err != nil {
			f.Close()
			t.Fatalf("cluster lock %s: %v", path, err)
		}
	}
	// Closing the file releases the lock.
	t.Cleanup(func() { f.Close() })
}

func flockRetry(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func quote(ident string) string { return "`" + ident + "`" }
