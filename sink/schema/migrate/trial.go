package migrate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// Try finds out, without touching the database, whether this server
// takes readsync's migrations from the user of the DSN: it applies every
// migration to a scratch database, named after the database and dropped
// again before it returns. A statement the server's dialect or the
// user's rights refuse fails it as it would fail the real migration (see
// sink.Refused). The scratch database holds no rows, so the data folds have
// nothing to do: what it proves is the statements and the rights.
//
// In cluster mode the scratch tables replicate under a ZooKeeper path of
// their own, so that they can never join the replication of readsync's
// tables, whatever READSYNC_CLICKHOUSE_REPLICA_PATH says.
func Try(ctx context.Context, c *chconn.Conn, gains GainsFolder) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := c.Names().Database() + "_readsync_check_" + hex.EncodeToString(b[:])
	topo := c.Names().Topology()
	if topo.Cluster != "" {
		topo.ReplicaPath = "/readsync_check_" + hex.EncodeToString(b[:]) + c.Names().ReplicaPath()
	}
	scratch := c.ForDatabase(chconn.NewNames(name, topo))
	defer func() {
		// The scratch database goes even when ctx has ended.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := c.Exec(dctx, "DROP DATABASE IF EXISTS "+chconn.QuoteIdent(name)+c.Names().OnCluster()); err != nil {
			c.Log().Warn("scratch database of a migration trial not dropped", "database", name, "err", c.Redact(err))
		}
	}()
	if err := runMigrations(ctx, scratch, gains, migrations()); err != nil {
		return c.Redact(fmt.Errorf("tried in the scratch database %q: %w", name, err))
	}
	return nil
}

// CheckViews reads no rows but makes the server plan a query of each view
// that users query: a view an earlier release created, which this server
// no longer accepts, fails it.
func CheckViews(ctx context.Context, c *chconn.Conn) error {
	for _, v := range append(schema.Views(), schema.NameHealthView) {
		rows, err := c.Query(ctx, "SELECT * FROM "+c.Names().Table(v)+" LIMIT 0")
		if err == nil {
			err = rows.Close()
		}
		if err != nil {
			return c.Redact(fmt.Errorf("view %s: %w", v, err))
		}
	}
	return nil
}
