package migrate

import (
	"context"
	"slices"
	"strings"
	gosync "sync"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
)

// Every migration renders its statements without a server, for one server
// and for a cluster: each statement runs ON CLUSTER exactly when the
// tables live on a cluster, each CREATE names the database, only cluster
// mode has local, replicated and Distributed tables, with a Distributed
// one over each local table, and no statement has a shape one of the
// tested servers refuses.
func TestMigrationsRenderWithoutAServer(t *testing.T) {
	for _, tt := range []struct {
		name string
		topo chconn.Topology
	}{
		{"one server", chconn.Topology{}},
		{"cluster", chconn.Topology{Cluster: "c"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := schema.DDL{Names: chconn.NewNames("d", tt.topo)}
			clustered := tt.topo.Cluster != ""
			var locals, distributed int
			for _, mig := range migrations() {
				stmts := mig.statements(d)
				// Migration 4 gives the tables that are not replicated a
				// window of INSERTs to remember; in cluster mode all are.
				// Migration 8 only adds columns to a table of 0.4.0.
				// Migration 9 records the move of the snapshot table,
				// which does not run in cluster mode.
				if len(stmts) == 0 && mig.id != 8 && (!clustered || (mig.id != 4 && mig.id != 9)) {
					t.Errorf("migration %d %q renders no statement", mig.id, mig.name)
				}
				for _, q := range stmts {
					if got := strings.Contains(q, " ON CLUSTER `c`"); got != clustered {
						t.Errorf("migration %d: ON CLUSTER is %v, want %v:\n%s", mig.id, got, clustered, q)
					}
					if strings.HasPrefix(q, "CREATE") && !strings.HasPrefix(q, "CREATE DATABASE IF NOT EXISTS `d`") && !strings.Contains(q, " `d`.`") {
						t.Errorf("migration %d: a CREATE that does not name the database d:\n%s", mig.id, q)
					}
					if !clustered && (strings.Contains(q, "_local`") || strings.Contains(q, "Replicated") || strings.Contains(q, "Distributed")) {
						t.Errorf("migration %d: a local, replicated or Distributed table on one server:\n%s", mig.id, q)
					}
					if strings.HasPrefix(q, "CREATE TABLE") && strings.Contains(q, "_local` ON CLUSTER") {
						locals++
					}
					if strings.Contains(q, "ENGINE = Distributed(`c`, `d`, ") {
						distributed++
					}
					for _, reason := range schema.RefusedBy(q) {
						t.Errorf("migration %d: %s:\n%s", mig.id, reason, q)
					}
				}
			}
			if clustered && (locals == 0 || locals != distributed) {
				t.Errorf("%d local tables, %d Distributed tables over them, want one over each", locals, distributed)
			}
		})
	}
}

// execRecorder notes every statement sent with Exec, which carries all of
// a migration's DDL.
type execRecorder struct {
	driver.Conn
	mu   gosync.Mutex
	sent []string
}

func (r *execRecorder) Exec(ctx context.Context, q string, args ...any) error {
	r.mu.Lock()
	r.sent = append(r.sent, q)
	r.mu.Unlock()
	return r.Conn.Exec(ctx, q, args...)
}

// What a migration renders is what it sends: migrating an empty database
// sends every statement each applicable migration renders, in order.
func TestMigrationsSendWhatTheyRender(t *testing.T) {
	db := sinktest.New(t)
	ch := openTest(t, db.DSN)
	rec := &execRecorder{}
	ch.Intercept(func(c driver.Conn) driver.Conn { rec.Conn = c; return rec })
	ctx := context.Background()
	if err := Apply(ctx, ch, noGains); err != nil {
		t.Fatal(err)
	}
	server, err := ch.Server(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sent := rec.sent
	for _, mig := range applicable(migrations(), server) {
		for _, q := range mig.statements(schema.DDL{Names: ch.Names()}) {
			i := slices.Index(sent, q)
			if i < 0 {
				t.Errorf("migration %d %q renders a statement it did not send after the previous one:\n%s", mig.id, mig.name, q)
				continue
			}
			sent = sent[i+1:]
		}
	}
}
