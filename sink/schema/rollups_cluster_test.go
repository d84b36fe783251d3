package schema_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/schema/migrate"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// clusterNames are the names of the cluster's database and tables.
func clusterNames(c *sinktest.Cluster) chconn.Names {
	return chconn.NewNames(c.Database, chconn.Topology{Cluster: c.Name, ReplicaPath: c.ReplicaPath})
}

// openConn connects to a node of the cluster, to write rows as the first
// release did, without migrating.
func openConn(t *testing.T, c *sinktest.Cluster, node int) *chconn.Conn {
	t.Helper()
	d, err := chconn.ParseDSN(c.DSNs[node])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := chconn.Open(d, clusterNames(c).Topology(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
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
			ch := historytest.OpenCluster(t, c, 0)
			conn, names := openConn(t, c, 0), clusterNames(c)
			d := schema.DDL{Names: names}
			// History before the upgrade, folded by the migration, then
			// writes through the materialized views and the day refresh.
			for _, q := range append([]string{d.CreateDatabase()}, append(d.CreateTable(schema.ProjectsTable.Def()),
				append(d.CreateTable(schema.MessagesTable.Def()), d.CreateTable(schema.SnapshotsTable.Def())...)...)...) {
				if err := migrate.ExecDDL(ctx, conn, q); err != nil {
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
				sctx := conn.SyncInserts(ctx)
				for _, err := range []error{chconn.Insert(sctx, conn, schema.ProjectsTable, b, b.Projects), chconn.Insert(sctx, conn, schema.MessagesTable, b, b.Messages),
					chconn.Insert(sctx, conn, schema.SnapshotsTable, b, b.Snapshots)} {
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
GROUP BY project_id, snapshot_at`, names.Table("message_read_snapshots"), names.Local("message_read_snapshots"))
			brute := map[string]string{
				schema.LatestView:   schema.MessageReadLatestV1(d),
				schema.DailyView:    schema.ProjectReadDailyV1(d),
				schema.SnapshotView: "SELECT snapshot_at, project_id, nft, project_name, messages, reads, total, " + schema.ReadRate + "\nFROM " + schema.WithProject(names, writes),
			}
			for node := range c.Conns {
				for _, r := range schema.Rollups() {
					c.SyncReplica(t, node, r+"_local")
				}
				c.SyncReplica(t, node, schema.DayRollup+"_local")
				c.SyncReplica(t, node, "message_read_snapshots_local")
				for view, bruteSQL := range brute {
					got := clusterRows(t, c.Conns[node], "SELECT * FROM "+c.Table(view))
					want := clusterRows(t, c.Conns[node], bruteSQL)
					if len(want) == 0 || !slices.Equal(got, want) {
						t.Errorf("node %d: %s differs from the brute force:\n got %v\nwant %v", node, view, got, want)
					}
				}
				// The curves by age, folded and written through the
				// Distributed tables, on every host: every message has one.
				c.SyncReplica(t, node, schema.AgeRollup+"_local")
				for _, view := range []string{schema.ByAgeView, schema.SpeedView} {
					got := clusterRows(t, c.Conns[node], "SELECT DISTINCT project_id, message_id FROM "+c.Table(view))
					if len(got) != 24 {
						t.Errorf("node %d: %s has the curves of %d messages, want 24: %v", node, view, len(got), got)
					}
				}
			}
			// The speeds stored equal the speeds computed from the curves,
			// on every host, once the reconcile has computed again what a
			// write may have computed from a replica behind it.
			if _, err := ch.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			for node := range c.Conns {
				c.SyncReplica(t, node, schema.AgeRollup+"_local")
				c.SyncReplica(t, node, schema.SpeedRollup+"_local")
				got := clusterRows(t, c.Conns[node], "SELECT * FROM "+c.Table(schema.SpeedView))
				want := clusterRows(t, c.Conns[node], schema.SpeedFromAges(names))
				if len(want) != 24 || !slices.Equal(got, want) {
					t.Errorf("node %d: %s differs from the speeds of the curves:\n got %v\nwant %v", node, schema.SpeedView, got, want)
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
