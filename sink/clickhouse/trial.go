package clickhouse

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/readsync/readsync/sink/chconn"
)

// TryMigrations finds out, without touching the database, whether this
// server takes readsync's migrations from the user of the DSN: it applies
// every migration to a scratch database, named after the database and
// dropped again before it returns. A statement the server's dialect or the
// user's rights refuse fails it as it would fail the real migration (see
// sink.Refused). The scratch database holds no rows, so the data folds have
// nothing to do: what it proves is the statements and the rights.
//
// In cluster mode the scratch tables replicate under a ZooKeeper path of
// their own, so that they can never join the replication of readsync's
// tables, whatever READSYNC_CLICKHOUSE_REPLICA_PATH says.
func (c *ClickHouse) TryMigrations(ctx context.Context) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := c.ddl.Database() + "_readsync_check_" + hex.EncodeToString(b[:])
	topo := c.ddl.Topology()
	if topo.Cluster != "" {
		topo.ReplicaPath = "/readsync_check_" + hex.EncodeToString(b[:]) + c.ddl.ReplicaPath()
	}
	names := chconn.NewNames(name, topo)
	scratch := &ClickHouse{conn: c.conn.ForDatabase(names), ddl: ddl{names}}
	defer func() {
		// The scratch database goes even when ctx has ended.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := c.conn.Exec(dctx, "DROP DATABASE IF EXISTS "+chconn.QuoteIdent(name)+c.ddl.OnCluster()); err != nil {
			c.conn.Log().Warn("scratch database of a migration trial not dropped", "database", name, "err", c.conn.Redact(err))
		}
	}()
	if err := scratch.migrate(ctx, migrations()); err != nil {
		return c.conn.Redact(fmt.Errorf("tried in the scratch database %q: %w", name, err))
	}
	return nil
}

// CheckViews reads no rows but makes the server plan a query of each view
// that users query: a view an earlier release created, which this server
// no longer accepts, fails it.
func (c *ClickHouse) CheckViews(ctx context.Context) error {
	for _, v := range Views() {
		rows, err := c.conn.Query(ctx, "SELECT * FROM "+c.ddl.Table(v)+" LIMIT 0")
		if err == nil {
			err = rows.Close()
		}
		if err != nil {
			return c.conn.Redact(fmt.Errorf("view %s: %w", v, err))
		}
	}
	return nil
}
