package resort_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/schema/migrate"
	"github.com/readsync/readsync/sink/schema/resort"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// The move on a sharded cluster, where 18.16 cannot rename the
// replicated tables that hold the rows: the copy keeps its name, and the
// Distributed table users query is swapped onto it, the materialized
// views with it. A process of the previous release writes through the
// Distributed table during the whole move, and a step is cut off in the
// middle. After it every row is there on its shard, under the new key,
// and every view equals its brute force.
func TestMoveToTheSortKeyOnACluster(t *testing.T) {
	t.Parallel()
	c := sinktest.NewCluster(t, sinktest.Sharded)
	ctx := context.Background()
	names := chconn.NewNames(c.Database, chconn.Topology{Cluster: c.Name, ReplicaPath: c.ReplicaPath})
	exec := func(q string) {
		t.Helper()
		if err := c.Conns[0].Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The tables as releases up to 0.5.0 created them, sorted by message
	// first, for the migrations to adopt.
	exec("CREATE DATABASE IF NOT EXISTS " + names.QuotedDatabase() + names.OnCluster())
	exec("CREATE TABLE " + names.Local("message_read_snapshots") + names.OnCluster() + ` (project_id Int64, message_id Int64, snapshot_at DateTime,
read_count UInt64, total UInt64, percent Float64, fetched_at DateTime, version UInt64, schedule String) ENGINE = ` + names.Engine("ReplacingMergeTree", "version") + `
PARTITION BY toYYYYMM(snapshot_at) ORDER BY (project_id, message_id, snapshot_at)`)
	exec("CREATE TABLE " + names.Table("message_read_snapshots") + names.OnCluster() + " AS " + names.Local("message_read_snapshots") +
		fmt.Sprintf(" ENGINE = Distributed(%s, %s, %s, cityHash64(project_id))", chconn.QuoteIdent(c.Name), names.QuotedDatabase(), chconn.QuoteIdent("message_read_snapshots_local")))

	topo := clickhouse.WithTopology(chconn.Topology{Cluster: c.Name, ReplicaPath: c.ReplicaPath})
	opts := []clickhouse.Option{topo, clickhouse.WithReconcileSettle(time.Second), clickhouse.WithResort(resort.Options{Settle: time.Second, StepRows: 40, Lease: migrate.Lease(10 * time.Second)})}
	ch := historytest.OpenSink(t, c.DSNs[0], opts...)
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	h := historytest.NewHistory(t, ch)
	h.Generate(false)
	for i := range 3 {
		h.Pass(time.Date(2026, 4, 2, 8*i, 0, 0, 0, time.UTC))
	}
	rows := func(table string) []string {
		t.Helper()
		got := sinktest.Lines(t, c.Conns[0], "SELECT DISTINCT concat(toString(project_id), ' ', toString(message_id), ' ', toString(toUInt32(snapshot_at)), ' ', toString(version), ' ', toString(read_count)) FROM "+names.Table(table))
		slices.Sort(got)
		return got
	}
	before := rows("message_read_snapshots")

	// A process of the previous release writes through the Distributed
	// table, to the other node, throughout the move.
	wctx := chconn.WithSettings(ctx, map[string]any{"insert_distributed_sync": 1})
	stopWriter := startPreviousReleaseWriter(wctx, t, c.Conns[1], names.Table("message_read_snapshots"), 3)

	m := &moveSteps{ctx: ctx, t: t, phases: map[string]int{}}
	m.step(ch) // set up
	m.step(ch) // the first range of the first partition
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, _ = ch.ResortStep(cctx)
	cancel()
	ch2 := historytest.OpenSink(t, c.DSNs[0], opts...)
	m.finish(ch2)
	written := stopWriter()
	if m.phases["setup"] != 1 || m.phases["copy"] == 0 || m.phases["copied"] == 0 || m.phases["swapped"] != 1 {
		t.Errorf("the move's steps: %v, want a setup, copies of ranges, partitions copied and a swap", m.phases)
	}
	for node, conn := range c.Conns {
		got := sinktest.Lines(t, conn, fmt.Sprintf("SELECT concat(name, ': ', sorting_key) FROM system.tables WHERE database = '%s' AND name IN ('message_read_snapshots_resorted_local', 'message_read_snapshots_local') ORDER BY name", c.Database))
		want := []string{"message_read_snapshots_local: project_id, message_id, snapshot_at", "message_read_snapshots_resorted_local: project_id, snapshot_at, message_id"}
		if !slices.Equal(got, want) {
			t.Errorf("node %d: the local tables after the move: %q, want %q", node, got, want)
		}
		engine := sinktest.Lines(t, conn, fmt.Sprintf("SELECT engine_full FROM system.tables WHERE database = '%s' AND name = 'message_read_snapshots'", c.Database))
		if len(engine) != 1 || !containsWord(engine[0], "message_read_snapshots_resorted_local") {
			t.Errorf("node %d: message_read_snapshots after the move: %q, want a Distributed table over the moved rows", node, engine)
		}
	}
	after := rows("message_read_snapshots")
	for _, r := range before {
		if _, found := slices.BinarySearch(after, r); !found {
			t.Errorf("row %s lost in the move", r)
		}
	}
	theirs := sinktest.Lines(t, c.Conns[0], fmt.Sprintf("SELECT toString(count(DISTINCT (project_id, snapshot_at, version))) FROM %s WHERE version >= %d",
		names.Table("message_read_snapshots"), uint64(1<<50)))
	if want := fmt.Sprint(written); len(theirs) != 1 || theirs[0] != want {
		t.Errorf("after the move, the table holds %v of the %s rows the previous release wrote during it", theirs, want)
	}
	if rep, err := ch2.ResortStep(ctx); err != nil || !rep.Done || rep.Phase != "" {
		t.Errorf("a step after the move: %+v, %v; want nothing left", rep, err)
	}
	// The views take the rows written through the moved table, on both
	// shards.
	h2 := historytest.NewHistory(t, ch2)
	h2.Version = h.Version
	h2.Pass(time.Date(2026, 4, 20, 0, 0, 0, 0, time.UTC))
	sinktest.AwaitSettled(t, c.Conns[0], time.Second) // WithReconcileSettle
	if _, err := ch2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	historytest.AssertVerified(t, ch2, time.Time{})
}

// containsWord reports whether s holds word as a whole identifier.
func containsWord(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if s[i:i+len(word)] != word {
			continue
		}
		before, after := i == 0 || !identChar(s[i-1]), i+len(word) == len(s) || !identChar(s[i+len(word)])
		if before && after {
			return true
		}
	}
	return false
}

func identChar(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
