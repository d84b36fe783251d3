package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
)

// recordingConn is a connection that notes every statement sent through
// it. rewrite, when set, changes a statement before it is sent, and
// tolerate, when set, turns the errors it accepts into success. With
// noRows, batches are prepared (the server checks the table and columns)
// but their rows never sent.
type recordingConn struct {
	driver.Conn
	rewrite  func(string) string
	tolerate func(error) bool
	noRows   bool

	mu   gosync.Mutex
	sent []string
}

func (c *recordingConn) note(q string) string {
	if c.rewrite != nil {
		q = c.rewrite(q)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, q)
	return q
}

func (c *recordingConn) result(err error) error {
	if err != nil && c.tolerate != nil && c.tolerate(err) {
		return nil
	}
	return err
}

func (c *recordingConn) Exec(ctx context.Context, q string, args ...any) error {
	return c.result(c.Conn.Exec(ctx, c.note(q), args...))
}

func (c *recordingConn) Query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	return c.Conn.Query(ctx, c.note(q), args...)
}

func (c *recordingConn) QueryRow(ctx context.Context, q string, args ...any) driver.Row {
	return c.Conn.QueryRow(ctx, c.note(q), args...)
}

func (c *recordingConn) PrepareBatch(ctx context.Context, q string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	b, err := c.Conn.PrepareBatch(ctx, c.note(q), opts...)
	if err != nil {
		return nil, c.result(err)
	}
	return &tolerantBatch{Batch: b, c: c}, nil
}

type tolerantBatch struct {
	driver.Batch
	c *recordingConn
}

func (b *tolerantBatch) Send() error {
	if b.c.noRows {
		return b.Batch.Abort()
	}
	return b.c.result(b.Batch.Send())
}

func openTest(t *testing.T, dsn string, opts ...Option) *ClickHouse {
	t.Helper()
	d, err := chconn.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := OpenClickHouse(context.Background(), d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// exercise sends every kind of statement readsync sends through ch: the
// migrations, a write of every table with its refreshes, a run record, a
// read of each view and, with checks, a reconcile and verifications.
func exercise(t *testing.T, ch *ClickHouse, checks bool) {
	t.Helper()
	ctx := context.Background()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	at := sink.TimeOf(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	b := &sink.Batch{
		Projects:  []sink.Project{{ID: 1, NFT: "p.eth", Name: "P", CreateAt: at, FetchedAt: at, Version: 1}},
		Messages:  []sink.Message{{ProjectID: 1, ID: 10, Subject: "s", CreateAt: at, FetchedAt: at, Version: 1}},
		Snapshots: []sink.Snapshot{{ProjectID: 1, MessageID: 10, SnapshotAt: at, ReadCount: 1, Total: 2, Percent: 50, FetchedAt: at, Version: 1}},
	}
	if err := ch.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := ch.RecordRun(ctx, sink.Run{RunID: "r", Schedule: "hourly", Trigger: "cron", Status: "ok", SnapshotAt: at.Time(), StartedAt: at.Time(), FinishedAt: at.Time()}); err != nil {
		t.Fatal(err)
	}
	if err := ch.CheckViews(ctx); err != nil {
		t.Fatal(err)
	}
	if !checks {
		return
	}
	if _, err := ch.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	// The whole history, and a window that holds the snapshot and the
	// tick, taken before it, as written since.
	for _, since := range []time.Time{{}, time.Now().Add(-48 * time.Hour)} {
		if _, err := ch.Verify(ctx, since); err != nil {
			t.Fatal(err)
		}
	}
}

// No statement readsync sends has a shape one of the tested servers
// refuses. The suite runs every statement on both servers too; this test
// names the shape and why, should one come back.
func TestNoStatementOnlyOneServerTakes(t *testing.T) {
	db := sinktest.New(t)
	ch := openTest(t, db.DSN)
	rec := &recordingConn{}
	ch.conn.Intercept(func(c driver.Conn) driver.Conn { rec.Conn = c; return rec })
	exercise(t, ch, true)
	if len(rec.sent) < 20 {
		t.Fatalf("only %d statements recorded", len(rec.sent))
	}
	for _, q := range rec.sent {
		for _, reason := range schema.RefusedBy(q) {
			t.Errorf("%s:\n%s", reason, q)
		}
	}
}

// ddlCheckCluster is the cluster the current release's test server
// defines (scripts/clickhouse.sh): itself alone, with ZooKeeper.
const ddlCheckCluster = "readsync_ddl_check"

// Every statement of cluster mode runs on a server of the current release.
// Such a server cannot run as a cluster here (its build refuses ON CLUSTER,
// and its replicated tables stay read-only, where an INSERT waits for them
// to become writable), so the statements run on the one server without ON
// CLUSTER, and writes run as far as they can without rows: an INSERT …
// SELECT has its SELECT planned (EXPLAIN), a batch INSERT is prepared,
// which checks its table and columns. Where the cluster is not defined the
// test skips, as it does where the server reaches no ZooKeeper (make test
// starts none; make test-all starts scripts/cluster.sh's), or fails under
// READSYNC_REQUIRE_CLUSTER_DDL=1.
func TestClusterStatementsOnOneServer(t *testing.T) {
	db := sinktest.New(t)
	lacking := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("READSYNC_REQUIRE_CLUSTER_DDL") == "1" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	var n uint64
	if err := db.Conn.QueryRow(context.Background(), "SELECT count() FROM system.clusters WHERE cluster = ?", ddlCheckCluster).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		lacking("the test server defines no cluster %s (scripts/clickhouse.sh defines it for the current release)", ddlCheckCluster)
	}
	// A replicated table of its own: created only where the server
	// reaches ZooKeeper (this build has no system.zookeeper to ask).
	probe := "default." + chconn.QuoteIdent(db.Name+"_zookeeper_probe")
	create := fmt.Sprintf("CREATE TABLE %s (x UInt8) ENGINE = ReplicatedMergeTree('/readsync_ddl_check/%s_zookeeper_probe', 'r') ORDER BY x", probe, db.Name)
	if err := db.Conn.Exec(context.Background(), create); err != nil {
		var ex *clickhouse.Exception
		if !errors.As(err, &ex) || ex.Code != 999 { // KEEPER_EXCEPTION
			t.Fatal(err)
		}
		lacking("the test server reaches no ZooKeeper for cluster %s (scripts/cluster.sh runs it): %v", ddlCheckCluster, err)
	}
	if err := db.Conn.Exec(context.Background(), "DROP TABLE "+probe); err != nil {
		t.Fatal(err)
	}
	ch := openTest(t, db.DSN, WithTopology(chconn.Topology{Cluster: ddlCheckCluster, ReplicaPath: "/readsync_ddl_check/{database}/{table}"}))
	onCluster := " ON CLUSTER " + chconn.QuoteIdent(ddlCheckCluster)
	rec := &recordingConn{
		rewrite: func(q string) string {
			q = strings.ReplaceAll(q, onCluster, "")
			if i := strings.Index(q, "SELECT"); strings.HasPrefix(q, "INSERT") && i > 0 {
				q = "EXPLAIN " + q[i:]
			}
			return q
		},
		tolerate: func(err error) bool {
			var ex *clickhouse.Exception
			return errors.As(err, &ex) && ex.Code == 242 // TABLE_IS_READ_ONLY
		},
		noRows: true,
	}
	ch.conn.Intercept(func(c driver.Conn) driver.Conn { rec.Conn = c; return rec })
	// Its replicated tables never catch up here, so every replica is
	// stale to a reconcile, which reads none of those (readFreshReplicas),
	// and schema_migrations records nothing, so Verify sees the schema
	// pending and refuses: both run on 18.16's real cluster.
	exercise(t, ch, false)
	var created, replicated uint64
	if err := db.Conn.QueryRow(context.Background(), "SELECT count(), countIf(engine LIKE 'Replicated%') FROM system.tables WHERE database = ?", db.Name).Scan(&created, &replicated); err != nil {
		t.Fatal(err)
	}
	// schema_migrations, 4 data and 14 rollup tables, the folds, the
	// legacy schedules, 2 change logs, the reconciles, the record of the
	// sort key's move, the names' failures and successes, the record of
	// expiry and that of refreshes, each replicated; a Distributed table
	// over each but schema_migrations; 8 materialized views and 12 views.
	if created != 77 || replicated != 29 {
		t.Errorf("%d objects, %d replicated, want 77 and 29", created, replicated)
	}
}
