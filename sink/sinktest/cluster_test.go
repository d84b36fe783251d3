package sinktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink/sinktest"
)

// exec runs DDL or an INSERT … SELECT on one node and fails the test on
// error. (18.16 does not take an INSERT … VALUES through Exec: it waits
// for the client to send the data as blocks.)
func exec(t *testing.T, conn driver.Conn, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_distributed_sync": 1}))
	if err := conn.Exec(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func count(t *testing.T, conn driver.Conn, table string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// createReplicated creates the database and a replicated table "events"
// on every node of the cluster.
func createReplicated(t *testing.T, c *sinktest.Cluster, table string) {
	t.Helper()
	exec(t, c.Conns[0], "CREATE DATABASE IF NOT EXISTS `"+c.Database+"` ON CLUSTER "+c.Name)
	exec(t, c.Conns[0], "CREATE TABLE "+c.Table(table)+" ON CLUSTER "+c.Name+
		" (id UInt64, name String) ENGINE = ReplicatedMergeTree('"+c.ReplicaPath+"', '{replica}') ORDER BY id")
}

func TestClusterReplicatedCopiesRowsToTheOtherReplica(t *testing.T) {
	c := sinktest.NewCluster(t, sinktest.Replicated)
	if len(c.Conns) != 2 || len(c.DSNs) != 2 {
		t.Fatalf("%d connections and %d DSNs, want 2 of each", len(c.Conns), len(c.DSNs))
	}
	for i, dsn := range c.DSNs {
		opts, err := clickhouse.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("DSN %d: %v", i, err)
		}
		if opts.Auth.Database != c.Database {
			t.Errorf("DSN %d names database %q, want %q", i, opts.Auth.Database, c.Database)
		}
	}
	createReplicated(t, c, "events")
	exec(t, c.Conns[0], "INSERT INTO "+c.Table("events")+" (id, name) SELECT 1, 'written on node 0'")
	c.SyncReplica(t, 1, "events")

	var name string
	if err := c.Conns[1].QueryRow(context.Background(), "SELECT name FROM "+c.Table("events")+" WHERE id = 1").Scan(&name); err != nil {
		t.Fatalf("read the row back on node 1: %v", err)
	}
	if name != "written on node 0" {
		t.Errorf("node 1 has name %q, want %q", name, "written on node 0")
	}
}

func TestClusterShardedSpreadsRowsOverBothShards(t *testing.T) {
	c := sinktest.NewCluster(t, sinktest.Sharded)
	createReplicated(t, c, "events_local")
	exec(t, c.Conns[0], "CREATE TABLE "+c.Table("events")+" ON CLUSTER "+c.Name+
		" AS "+c.Table("events_local")+" ENGINE = Distributed("+c.Name+", `"+c.Database+"`, events_local, id)")
	const rows = 10
	// insert_distributed_sync=1 (set by exec): the INSERT returns once every
	// shard has its rows, so they can be counted at once.
	exec(t, c.Conns[0], "INSERT INTO "+c.Table("events")+" (id, name) SELECT number, 'x' FROM system.numbers LIMIT 10")

	var total uint64
	for i, conn := range c.Conns {
		n := count(t, conn, c.Table("events_local"))
		if n == 0 {
			t.Errorf("node %d holds no rows: the Distributed table did not spread them", i)
		}
		total += n
	}
	if total != rows {
		t.Errorf("the shards hold %d rows together, want %d", total, rows)
	}
	if n := count(t, c.Conns[1], c.Table("events")); n != rows {
		t.Errorf("the Distributed table on node 1 reads %d rows, want %d", n, rows)
	}
}

func TestClusterStoppedReplicaCatchesUpAfterStart(t *testing.T) {
	c := sinktest.NewCluster(t, sinktest.Replicated, sinktest.Exclusive())
	createReplicated(t, c, "events")

	c.StopNode(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Conns[1].Ping(ctx); err == nil {
		t.Fatal("node 1 still answers after StopNode")
	}
	exec(t, c.Conns[0], "INSERT INTO "+c.Table("events")+" (id, name) SELECT 2, 'written while node 1 was down'")
	c.StartNode(t, 1)
	c.SyncReplica(t, 1, "events")
	if n := count(t, c.Conns[1], c.Table("events")); n != 1 {
		t.Errorf("node 1 has %d rows after catching up, want 1", n)
	}

	// A test that ends with a node stopped gets it back at its cleanup.
	t.Run("left stopped", func(t *testing.T) { c.StopNode(t, 1) })
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Conns[1].Ping(ctx); err != nil {
		t.Errorf("node 1 does not answer after the subtest that stopped it ended: %v", err)
	}
}

// A test's database is gone from every node when the test ends, its
// replicated tables' ZooKeeper paths with it.
func TestClusterCleanupDropsTheDatabaseEverywhere(t *testing.T) {
	outer := sinktest.NewCluster(t, sinktest.Sharded)
	var inner *sinktest.Cluster
	t.Run("creates", func(t *testing.T) {
		inner = sinktest.NewCluster(t, sinktest.Sharded)
		createReplicated(t, inner, "events")
	})
	for i, conn := range outer.Conns {
		var n uint64
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.databases WHERE name = ?", inner.Database).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("node %d still has the database %s", i, inner.Database)
		}
		shard := []string{"01", "02"}[i]
		path := "/clickhouse/tables/" + shard + "/" + inner.Database
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.zookeeper WHERE path = ?", path).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("ZooKeeper still holds %d tables under %s", n, path)
		}
	}
}
