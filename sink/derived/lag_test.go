package derived_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
	"github.com/readsync/readsync/sink/verify"
)

// A refresh that reads a replica behind its peer computes a snapshot's
// gains from stale rows, and so does the reconcile right after it, while
// the replica still looks current. Once the replica has caught up, the
// next pass's reconcile reads those changes again and mends the rows:
// every view equals its brute force on both hosts, checked a project at a
// time.
func TestReconcileMendsARefreshOfALaggingReplica(t *testing.T) {
	c := sinktest.NewCluster(t, sinktest.Replicated)
	ctx := context.Background()
	// A check in steps of a project each: past the first, a step reads
	// the views through their queries narrowed to its project on a
	// server that narrows no joined table (18.16).
	step := clickhouse.WithVerifyStepRows(1)
	chs := []*clickhouse.ClickHouse{historytest.OpenCluster(t, c, 0, step), historytest.OpenCluster(t, c, 1, step)}
	if err := chs[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	version := uint64(1)
	pass := func(node int, hour int) {
		t.Helper()
		at := sink.TimeOf(day.Add(time.Duration(hour) * time.Hour))
		b := &sink.Batch{Schedule: "hourly"}
		for p := int64(1); p <= 3; p++ {
			version++
			b.Projects = append(b.Projects, sink.Project{ID: p, NFT: fmt.Sprintf("p%d.eth", p), CreateAt: at, FetchedAt: at, Version: version})
			for m := int64(1); m <= 4; m++ {
				b.Messages = append(b.Messages, sink.Message{ProjectID: p, ID: m, CreateAt: at, FetchedAt: at, Version: version})
				b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: m, SnapshotAt: at, FetchedAt: at,
					ReadCount: uint64(hour*10) + uint64(m), Total: 100, Version: version})
			}
		}
		if err := chs[node].Write(ctx, b); err != nil {
			t.Fatal(err)
		}
		if _, err := chs[node].Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	replicated := sinktest.Lines(t, c.Conns[1], fmt.Sprintf("SELECT name FROM system.tables WHERE database = '%s' AND engine LIKE 'Replicated%%'", c.Database))
	fetches := func(node int, verb string) {
		t.Helper()
		for _, table := range replicated {
			if err := c.Conns[node].Exec(ctx, fmt.Sprintf("SYSTEM %s FETCHES %s", verb, c.Table(table))); err != nil {
				t.Fatal(err)
			}
		}
	}
	syncAll := func() {
		t.Helper()
		for node := range c.Conns {
			for _, table := range replicated {
				c.SyncReplica(t, node, table)
			}
		}
	}
	verify := func(node int, since time.Time) verify.Report {
		t.Helper()
		rep, err := chs[node].Verify(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}

	pass(0, 8)
	syncAll()
	// Node 2 stops fetching what node 1 writes: the pass of 09:00 through
	// node 1 is on node 1 only when node 2 writes 10:00 and reconciles.
	fetches(1, "STOP")
	pass(0, 9)
	pass(1, 10)
	fetches(1, "START")
	syncAll()
	if rep := verify(0, time.Time{}); rep.Clean() {
		t.Fatal("the views are right after a refresh that read a lagging replica: the test staged no lag")
	}
	pass(1, 11)
	syncAll()
	// Over the whole history, and over what was written in the last two
	// days: all of it, taken days before.
	for node := range c.Conns {
		for _, since := range []time.Time{{}, time.Now().Add(-48 * time.Hour)} {
			for _, v := range verify(node, since).Views {
				if v.Differs() {
					var rows []string
					for _, d := range append(append(v.Missing, v.Extra...), v.Wrong...) {
						rows = append(rows, d.Key)
					}
					t.Errorf("node %d, since %s: %s differs from its brute force after the next pass: %s", node+1, since, v.View, strings.Join(rows, "; "))
				}
			}
		}
	}
}
