package migrate

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
)

func openCluster(t *testing.T, c *sinktest.Cluster, node int) *chconn.Conn {
	t.Helper()
	return openOn(t, c.DSNs[node], chconn.Topology{Cluster: c.Name, ReplicaPath: c.ReplicaPath})
}

func engines(t *testing.T, c *sinktest.Cluster, node int) map[string]string {
	t.Helper()
	rows, err := c.Conns[node].Query(context.Background(), "SELECT name, engine FROM system.tables WHERE database = ?", c.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			t.Fatal(err)
		}
		out[name] = engine
	}
	return out
}

// In cluster mode every host gets the replicated local tables, the
// Distributed tables under the names users query, the views and the
// record of migrations; rows written through one host are read back on
// every host, a project's rows all on one shard.
func TestClusterSchemaAndWrites(t *testing.T) {
	for _, topo := range []string{sinktest.Replicated, sinktest.Sharded} {
		t.Run(topo, func(t *testing.T) {
			c := sinktest.NewCluster(t, topo)
			ctx := context.Background()
			ch := openCluster(t, c, 0)
			if err := Apply(ctx, ch, noGains); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"projects_local": "ReplicatedReplacingMergeTree", "messages_local": "ReplicatedReplacingMergeTree",
				"message_read_snapshots_local": "ReplicatedReplacingMergeTree", "sync_runs_local": "ReplicatedMergeTree",
				"projects": "Distributed", "messages": "Distributed", "message_read_snapshots": "Distributed", "sync_runs": "Distributed",
				"message_read_latest": "View", "project_read_daily": "View", "schema_migrations": "ReplicatedReplacingMergeTree",
				"project_read_snapshots": "View", "schedule_coverage": "View", "project_read_day_rollup_local": "ReplicatedAggregatingMergeTree",
				"project_read_day_rollup": "Distributed", "project_read_snapshot_rollup_folds_local": "ReplicatedReplacingMergeTree",
				"project_read_snapshot_rollup_folds": "Distributed", "project_read_gain_rollup_local": "ReplicatedMergeTree",
				"project_read_gain_rollup": "Distributed", "project_read_day_gain_rollup_local": "ReplicatedAggregatingMergeTree",
				"project_read_day_gain_rollup": "Distributed", "project_read_gains": "View", "project_read_daily_gains": "View",
				"snapshot_schedules_local": "ReplicatedReplacingMergeTree", "snapshot_schedules": "Distributed",
				"reconciles_local": "ReplicatedMergeTree", "reconciles": "Distributed",
				"snapshot_resorts_local": "ReplicatedMergeTree", "snapshot_resorts": "Distributed",
				"project_read_tip_rollup_local": "ReplicatedAggregatingMergeTree", "project_read_tip_rollup": "Distributed",
				"refreshes_local": "ReplicatedMergeTree", "refreshes": "Distributed",
				"name_failures_local": "ReplicatedReplacingMergeTree", "name_failures": "Distributed",
				"name_successes_local": "ReplicatedReplacingMergeTree", "name_successes": "Distributed", "name_health": "View",
				"expiries_local": "ReplicatedMergeTree", "expiries": "Distributed",
				"project_read_hour_rollup_local": "ReplicatedAggregatingMergeTree", "project_read_hour_rollup": "Distributed",
				"project_read_hour_gain_rollup_local": "ReplicatedAggregatingMergeTree", "project_read_hour_gain_rollup": "Distributed",
				"project_read_hourly": "View", "project_read_hourly_gains": "View",
				"message_read_age_rollup_local": "ReplicatedAggregatingMergeTree", "message_read_age_rollup": "Distributed",
				"message_read_by_age": "View", "message_read_speed": "View", "project_read_by_age": "View",
				"message_read_speed_rollup_local": "ReplicatedReplacingMergeTree", "message_read_speed_rollup": "Distributed",
			}
			// The tables materialized views fill, each with its view.
			for name, engine := range map[string]string{
				schema.LatestRollup: "AggregatingMergeTree", schema.DailyRollup: "AggregatingMergeTree", schema.SnapshotRollup: "SummingMergeTree",
				schema.FirstRollup: "AggregatingMergeTree", schema.SnapshotChanges: "MergeTree", schema.TickChanges: "MergeTree",
				schema.HourlyRollup: "AggregatingMergeTree", schema.NameFailureHours: "AggregatingMergeTree",
			} {
				want[name+"_local"] = "Replicated" + engine
				want[name] = "Distributed"
				want[name+"_mv"] = "MaterializedView"
			}
			for node := range c.Conns {
				got := engines(t, c, node)
				if len(got) != len(want) {
					t.Errorf("node %d has %v, want %v", node, got, want)
				}
				for name, engine := range want {
					if got[name] != engine {
						t.Errorf("node %d: %s is %q, want %q", node, name, got[name], engine)
					}
				}
				c.SyncReplica(t, node, migrationsTable)
				// Any host answers for the schema: the other one is current too.
				v, err := ReadVersion(ctx, openCluster(t, c, node))
				if err != nil || !v.Current() {
					t.Errorf("node %d: schema %+v, %v; want current", node, v, err)
				}
			}

			at := sink.TimeOf(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
			b := &sink.Batch{}
			for p := int64(1); p <= 8; p++ {
				b.Projects = append(b.Projects, sink.Project{ID: p, NFT: "p", CreateAt: at, FetchedAt: at, Version: 1})
				for m := int64(1); m <= 3; m++ {
					b.Messages = append(b.Messages, sink.Message{ProjectID: p, ID: m, CreateAt: at, FetchedAt: at, Version: 1})
					b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: m, SnapshotAt: at, ReadCount: 1, Total: 2, FetchedAt: at, Version: 1})
				}
			}
			// Through the other host: the INSERT is synchronous, every row
			// is on its shard when it returns.
			write(t, openCluster(t, c, 1), b)
			perNode := make([][]int64, len(c.Conns))
			for node, conn := range c.Conns {
				c.SyncReplica(t, node, "message_read_snapshots_local")
				// message_read_latest reads the rollup, which the other
				// host's materialized view filled and replication brings here.
				c.SyncReplica(t, node, schema.LatestRollup+"_local")
				var n uint64
				if err := conn.QueryRow(ctx, "SELECT count() FROM "+c.Table("message_read_snapshots")+" FINAL").Scan(&n); err != nil || n != 24 {
					t.Errorf("node %d: %d snapshots through the Distributed table (%v), want 24", node, n, err)
				}
				if err := conn.QueryRow(ctx, "SELECT count() FROM "+c.Table("message_read_latest")).Scan(&n); err != nil || n != 24 {
					t.Errorf("node %d: %d rows in message_read_latest (%v), want 24", node, n, err)
				}
				ids, err := chconn.QueryColumn[int64](ctx, conn, "SELECT DISTINCT project_id FROM "+c.Table("message_read_snapshots_local")+" ORDER BY project_id")
				if err != nil {
					t.Fatal(err)
				}
				perNode[node] = ids
			}
			switch topo {
			case sinktest.Replicated:
				for node, ids := range perNode {
					if len(ids) != 8 {
						t.Errorf("replica %d holds projects %v, want all 8", node, ids)
					}
				}
			case sinktest.Sharded:
				both := slices.Sorted(slices.Values(append(slices.Clone(perNode[0]), perNode[1]...)))
				if len(both) != 8 || len(slices.Compact(both)) != 8 || len(perNode[0]) == 0 || len(perNode[1]) == 0 {
					t.Errorf("shards hold projects %v and %v: want 8 projects, each on one shard, both shards used", perNode[0], perNode[1])
				}
			}
		})
	}
}

// Processes starting together against a cluster, through both hosts, end
// with one schema and no error.
func TestClusterMigrateRace(t *testing.T) {
	c := sinktest.NewCluster(t, sinktest.Sharded)
	raceMigrations(t, func(i int) *chconn.Conn { return openCluster(t, c, i%len(c.Conns)) })
	for node, conn := range c.Conns {
		c.SyncReplica(t, node, migrationsTable)
		ids, err := chconn.QueryColumn[uint32](context.Background(), conn, "SELECT DISTINCT id FROM "+c.Table(migrationsTable)+" ORDER BY id")
		if want := append(builtinIDs(t, c.DSNs[0]), 1000); err != nil || !slices.Equal(ids, want) {
			t.Errorf("node %d: schema_migrations %v (%v), want %v", node, ids, err, want)
		}
		for _, table := range []string{"projects_local", "projects"} {
			var n uint64
			if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name = 'note'",
				c.Database, table).Scan(&n); err != nil || n != 1 {
				t.Errorf("node %d: %s.note: %d (%v), want the column once", node, table, n, err)
			}
		}
	}
}
