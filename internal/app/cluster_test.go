package app

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/sethvargo/go-envconfig"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/sink/sinktest"
)

// dumps are the queries that show everything a pass stored, without what
// differs from one run to the next (fetch times, versions, run ids), in a
// fixed order: two stores hold the same data when their dumps are equal.
var dumps = []struct{ name, query string }{
	// FINAL through a Distributed table must select the version column on
	// 18.16: hence the subqueries.
	{"projects", "SELECT id, nft, name, description, logo, type, wallet_address, create_at, raw FROM (SELECT * FROM {db}.projects FINAL) ORDER BY id"},
	{"messages", "SELECT project_id, id, sender, recv_group, receivers, subject, type, is_all_subscribers, create_at FROM (SELECT * FROM {db}.messages FINAL) ORDER BY project_id, id"},
	{"snapshots", "SELECT project_id, message_id, snapshot_at, read_count, total, percent FROM (SELECT * FROM {db}.message_read_snapshots FINAL) ORDER BY project_id, message_id, snapshot_at"},
	{"sync_runs", "SELECT schedule, trigger, snapshot_at, nft_total, nft_ok, nft_failed, messages, status, error FROM {db}.sync_runs ORDER BY snapshot_at, nft_total"},
	{"message_read_latest", "SELECT * FROM {db}.message_read_latest ORDER BY project_id, message_id"},
	{"project_read_daily", "SELECT * FROM {db}.project_read_daily ORDER BY day, project_id"},
	{"project_read_gains", "SELECT snapshot_at, project_id, nft, project_name, ifNull(toString(prev_snapshot_at), ''), messages, new_messages, " +
		"reads_gained, missed_ticks FROM {db}.project_read_gains ORDER BY project_id, snapshot_at"},
	{"project_read_daily_gains", "SELECT * FROM {db}.project_read_daily_gains ORDER BY day, project_id"},
	{"project_read_hourly", "SELECT * FROM {db}.project_read_hourly ORDER BY hour, project_id"},
	{"project_read_hourly_gains", "SELECT * FROM {db}.project_read_hourly_gains ORDER BY hour, project_id"},
	{"message_read_by_age", "SELECT * FROM {db}.message_read_by_age ORDER BY project_id, message_id, age_hours"},
	{"message_read_speed", "SELECT project_id, message_id, subject, latest_reads, ifNull(toString(reads_24h), ''), ifNull(toString(share_24h), ''), " +
		"ifNull(toString(half_after_hours_min), ''), ifNull(toString(half_after_hours_max), ''), ifNull(toString(nine_tenths_after_hours_min), ''), " +
		"ifNull(toString(nine_tenths_after_hours_max), '') FROM {db}.message_read_speed ORDER BY project_id, message_id"},
	{"project_read_by_age", "SELECT * FROM {db}.project_read_by_age ORDER BY project_id, age_hours"},
}

// dump reads every row of the dumps from one server, as text.
func dump(t *testing.T, conn driver.Conn, db string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dumps {
		rows, err := conn.Query(context.Background(), strings.ReplaceAll(d.query, "{db}", "`"+db+"`"))
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		var b strings.Builder
		for rows.Next() {
			types := rows.ColumnTypes()
			dest := make([]any, len(types))
			for i, ct := range types {
				dest[i] = reflect.New(ct.ScanType()).Interface()
			}
			if err := rows.Scan(dest...); err != nil {
				t.Fatalf("%s: %v", d.name, err)
			}
			for _, v := range dest {
				fmt.Fprintf(&b, "%q\t", fmt.Sprint(reflect.ValueOf(v).Elem().Interface()))
			}
			b.WriteString("\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		rows.Close()
		out[d.name] = b.String()
	}
	return out
}

func compareDumps(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for _, d := range dumps {
		if got[d.name] != want[d.name] {
			t.Errorf("%s: %s differs:\n got\n%s\nwant\n%s", what, d.name, got[d.name], want[d.name])
		}
	}
}

// onCluster points the fixture at a cluster database, through node 0.
func (f *fixture) onCluster(c *sinktest.Cluster) {
	f.Env["READSYNC_CLICKHOUSE_DSN"] = c.DSNs[0]
	f.Env["READSYNC_CLICKHOUSE_CLUSTER"] = c.Name
	f.Env["READSYNC_CLICKHOUSE_REPLICA_PATH"] = c.ReplicaPath
}

var localTables = []string{"projects_local", "messages_local", "message_read_snapshots_local", "sync_runs_local"}

// The same passes, the golden data set run twice with a change between,
// store the same rows on a single server, on one shard of two replicas and
// on two shards; on a cluster, every node reads all of them back through
// the Distributed tables and the views.
func TestBackfillAcrossTopologies(t *testing.T) {
	t.Parallel()
	projects := append(goldenProjects(), apitest.Generate(12, 4, 3)...)
	names := apptest.NamesOf(projects)
	passes := func(t *testing.T, f *fixture) {
		t.Helper()
		for i, at := range []string{"2026-02-03T04:00:00Z", "2026-02-03T05:00:00Z", "2026-02-03T05:00:00Z"} {
			if i == 2 {
				p := projects[0]
				p.Name = "renamed"
				p.Messages = append([]apitest.Message(nil), p.Messages...)
				p.Messages[0].ReadCount, p.Messages[0].Percent = 9, "90.00%"
				f.Srv.SetProject(p)
			}
			if code, _, stderr := f.run(t, "--backfill", "--snapshot-at", at); code != ExitOK {
				t.Fatalf("pass %d: exit %d:\n%s", i+1, code, stderr)
			}
		}
	}

	single := newFixture(t, names, apitest.WithProjects(projects...))
	passes(t, single)
	want := dump(t, single.DB.Conn, single.DB.Name)
	if !strings.Contains(want["projects"], `"renamed"`) || strings.Count(want["sync_runs"], "\n") != 3 {
		t.Fatalf("single server: the passes did not store what they should:\n%s\n%s", want["projects"], want["sync_runs"])
	}

	for _, topo := range []string{sinktest.Replicated, sinktest.Sharded} {
		t.Run(topo, func(t *testing.T) {
			c := sinktest.NewCluster(t, topo)
			f := newFixture(t, names, apitest.WithProjects(projects...))
			f.onCluster(c)
			passes(t, f)
			for node, conn := range c.Conns {
				if topo == sinktest.Replicated {
					for _, table := range localTables {
						c.SyncReplica(t, node, table)
					}
				}
				compareDumps(t, fmt.Sprintf("node %d", node), dump(t, conn, c.Database), want)
			}
		})
	}
}

// A replica stopped during a pass loses nothing: the pass, and one started
// while it is down, write everything through the other replica without
// spooling (a current schema issues no ON CLUSTER DDL, which would wait for
// the stopped host), and the replica catches up once it is back.
func TestReplicaDownDuringPass(t *testing.T) {
	t.Parallel()
	c := sinktest.NewCluster(t, sinktest.Replicated, sinktest.Exclusive())
	projects := apitest.Generate(40, 4, 11)
	names := apptest.NamesOf(projects)
	f := newFixture(t, names, apitest.WithProjects(projects...), apitest.WithLatency(100*time.Millisecond))
	f.onCluster(c)
	f.Env["READSYNC_CONCURRENCY"] = "1"
	f.Env["READSYNC_BATCH_ROWS"] = "18" // a name is 9 rows: an INSERT every two names
	if code, _, stderr := f.run(t, "--migrate"); code != ExitOK {
		t.Fatalf("--migrate: exit %d:\n%s", code, stderr)
	}

	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"--backfill", "--snapshot-at", "2026-04-01T00:00:00Z"},
			envconfig.MapLookuper(f.Env), &bytes.Buffer{}, &stderr)
	}()
	for f.Srv.RequestCount(apitest.DetailPath) < 8 {
		select {
		case code := <-done:
			t.Fatalf("the pass ended (exit %d) before the replica could be stopped", code)
		case <-time.After(20 * time.Millisecond):
		}
	}
	c.StopNode(t, 1)
	if n := f.Srv.RequestCount(apitest.DetailPath); n >= len(names) {
		t.Logf("the replica stopped only after the pass fetched its %d names", n)
	}
	if code := <-done; code != ExitOK {
		t.Fatalf("pass with a replica down: exit %d:\n%s", code, stderr.String())
	}
	if code, _, stderr := f.run(t, "--backfill", "--snapshot-at", "2026-04-01T01:00:00Z"); code != ExitOK {
		t.Fatalf("pass started with a replica down: exit %d:\n%s", code, stderr)
	}
	c.StartNode(t, 1)
	for _, table := range localTables {
		c.SyncReplica(t, 1, table)
	}
	want := dump(t, c.Conns[0], c.Database)
	if n := strings.Count(want["snapshots"], "\n"); n != 2*40*4 {
		t.Errorf("%d snapshot rows on the live replica, want %d", n, 2*40*4)
	}
	// The caught-up replica's own rows, not the Distributed table's, which
	// could read them from the other replica.
	for _, table := range localTables {
		var n0, n1 uint64
		q := "SELECT count() FROM " + c.Table(table)
		if err := c.Conns[0].QueryRow(context.Background(), q).Scan(&n0); err != nil {
			t.Fatal(err)
		}
		if err := c.Conns[1].QueryRow(context.Background(), q).Scan(&n1); err != nil {
			t.Fatal(err)
		}
		if n0 != n1 || n0 == 0 {
			t.Errorf("%s: %d rows on the live replica, %d on the restarted one", table, n0, n1)
		}
	}
	compareDumps(t, "restarted replica", dump(t, c.Conns[1], c.Database), want)
}

// --check on a cluster reaches every host and reports the schema version,
// changing nothing; --migrate then creates the schema on every host.
func TestCheckOnCluster(t *testing.T) {
	t.Parallel()
	c := sinktest.NewCluster(t, sinktest.Replicated)
	f := newFixture(t, []string{"p.eth"}, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth"}))
	f.onCluster(c)
	code, stdout, stderr := f.run(t, "--check")
	if code != ExitOK {
		t.Fatalf("--check: exit %d:\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"clickhouse: cluster readsync_replicated host 127.0.0.1:19101 (shard 1, replica 1): ok (server ",
		"clickhouse: cluster readsync_replicated host 127.0.0.1:19102 (shard 1, replica 2): ok (server ",
		"schema version 0, pending: 1 \"create tables and views\", 2 ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--check lacks %q:\n%s", want, stdout)
		}
	}
	for node, conn := range c.Conns {
		var n uint64
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.databases WHERE name = ?", c.Database).Scan(&n); err != nil || n != 0 {
			t.Errorf("node %d: --check created the database (%v)", node, err)
		}
	}
	if code, _, stderr := f.run(t, "--migrate"); code != ExitOK {
		t.Fatalf("--migrate: exit %d:\n%s", code, stderr)
	}
	c.SyncReplica(t, 1, "schema_migrations")
	f.Env["READSYNC_CLICKHOUSE_DSN"] = c.DSNs[1] // the other host knows the version too
	if code, stdout, _ := f.run(t, "--check"); code != ExitOK || !strings.Contains(stdout, "schema version 17, current") {
		t.Errorf("--check after --migrate, through the other host: exit %d:\n%s", code, stdout)
	}
}
