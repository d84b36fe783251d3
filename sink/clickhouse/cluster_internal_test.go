package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/sinktest"
)

func openCluster(t *testing.T, c *sinktest.Cluster, node int) *ClickHouse {
	t.Helper()
	return openTest(t, c.DSNs[node], WithTopology(chconn.Topology{Cluster: c.Name, ReplicaPath: c.ReplicaPath}))
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
			if err := ch.Migrate(ctx); err != nil {
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
			}
			for _, r := range append(rollupTables(), firstRollupTable, snapshotChangesTable, tickChangesTable) {
				want[r.name+"_local"] = "Replicated" + r.layout.engine.name
				want[r.name] = "Distributed"
				want[r.name+"_mv"] = "MaterializedView"
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
				v, err := openCluster(t, c, node).SchemaVersion(ctx)
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
			if err := openCluster(t, c, 1).Write(ctx, b); err != nil {
				t.Fatal(err)
			}
			perNode := make([][]int64, len(c.Conns))
			for node, conn := range c.Conns {
				c.SyncReplica(t, node, "message_read_snapshots_local")
				// message_read_latest reads the rollup, which the other
				// host's materialized view filled and replication brings here.
				c.SyncReplica(t, node, latestRollup+"_local")
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
	raceMigrations(t, func(i int) *ClickHouse { return openCluster(t, c, i%len(c.Conns)) })
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

// In cluster mode the rollups fill on the shard of each project's
// snapshots and replicate with them: every view, read on every host,
// equals the brute-force argMax over the snapshots, on one shard with two
// replicas and on two shards.
func TestClusterRollupsEqualBruteForce(t *testing.T) {
	for _, topo := range []string{sinktest.Replicated, sinktest.Sharded} {
		t.Run(topo, func(t *testing.T) {
			c := sinktest.NewCluster(t, topo)
			ctx := context.Background()
			ch := openCluster(t, c, 0)
			// History before the upgrade, folded by the migration, then
			// writes through the materialized views and the day refresh.
			old := ch.ddl
			for _, q := range append([]string{old.createDatabase()}, append(old.createTable(ProjectsTable.def()),
				append(old.createTable(MessagesTable.def()), old.createTable(SnapshotsTable.def())...)...)...) {
				if err := execDDL(ctx, ch.conn, q); err != nil {
					t.Fatal(err)
				}
			}
			day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			version := uint64(1)
			pass := func(at time.Time, write func(*sink.Batch)) {
				b := &sink.Batch{}
				for p := int64(1); p <= 6; p++ {
					version++
					ts := sink.TimeOf(at)
					b.Projects = append(b.Projects, sink.Project{ID: p, NFT: fmt.Sprintf("p%d.eth", p), CreateAt: ts, FetchedAt: ts, Version: version})
					for m := int64(1); m <= 4; m++ {
						if p == 2 && m == 4 && at.Hour() > 12 {
							continue // no longer listed
						}
						b.Messages = append(b.Messages, sink.Message{ProjectID: p, ID: m, Subject: "s", CreateAt: ts, FetchedAt: ts, Version: version})
						b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: m, SnapshotAt: ts, FetchedAt: ts,
							ReadCount: uint64(at.Hour()) + uint64(m), Total: 30, Percent: float64(m), Version: version})
					}
				}
				write(b)
			}
			direct := func(b *sink.Batch) {
				sctx := ch.conn.SyncInserts(ctx)
				for _, err := range []error{chconn.Insert(sctx, ch.conn, ProjectsTable, b, b.Projects), chconn.Insert(sctx, ch.conn, MessagesTable, b, b.Messages),
					chconn.Insert(sctx, ch.conn, SnapshotsTable, b, b.Snapshots)} {
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			written := func(b *sink.Batch) {
				if err := ch.Write(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			pass(day.Add(6*time.Hour), direct)
			pass(day.Add(18*time.Hour), direct)
			if err := ch.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			pass(day.Add(20*time.Hour), written)
			pass(day.Add(20*time.Hour), written) // the tick run twice
			pass(day.Add(30*time.Hour), written)
			pass(day.Add(3*time.Hour), written) // a backfill in the past

			// The brute force aggregates the whole history, as the first
			// release's views did; the per-snapshot one sums the rows of
			// each project's newest write at each snapshot. The IN reads
			// each shard's own rows: a project's rows are all on one shard.
			writes := fmt.Sprintf(`SELECT project_id, snapshot_at, count() AS messages, sum(read_count) AS reads, sum(total) AS total
FROM %[1]s
WHERE (project_id, snapshot_at, version) IN (SELECT project_id, snapshot_at, max(version) FROM %[2]s GROUP BY project_id, snapshot_at)
GROUP BY project_id, snapshot_at`, ch.ddl.Table("message_read_snapshots"), ch.ddl.Local("message_read_snapshots"))
			brute := map[string]string{
				latestView:   messageReadLatestV1(ch.ddl),
				dailyView:    projectReadDailyV1(ch.ddl),
				snapshotView: "SELECT snapshot_at, project_id, nft, project_name, messages, reads, total, " + readRate + "\nFROM " + withProject(ch.ddl, writes),
			}
			for node := range c.Conns {
				for _, r := range rollupTables() {
					c.SyncReplica(t, node, r.name+"_local")
				}
				c.SyncReplica(t, node, dayRollup+"_local")
				c.SyncReplica(t, node, "message_read_snapshots_local")
				for view, bruteSQL := range brute {
					got := clusterRows(t, c.Conns[node], "SELECT * FROM "+c.Table(view))
					want := clusterRows(t, c.Conns[node], bruteSQL)
					if len(want) == 0 || !slices.Equal(got, want) {
						t.Errorf("node %d: %s differs from the brute force:\n got %v\nwant %v", node, view, got, want)
					}
				}
			}
		})
	}
}

// clusterRows returns a query's rows as sorted text lines.
func clusterRows(t *testing.T, conn driver.Conn, q string) []string {
	t.Helper()
	out := sinktest.Lines(t, conn, "SELECT arrayStringConcat(arrayMap(x -> toString(x), [toString(tuple(*))]), '') FROM ("+q+")")
	slices.Sort(out)
	return out
}
