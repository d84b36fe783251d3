package migrate

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink/chconn"
)

// addColumn adds a column to a data table unless it is there, after the
// column named after. 18.16 has no ADD COLUMN IF NOT EXISTS, so it looks
// in system.columns first, and a concurrent process adding the same column
// in between is caught by its "already exists" answer.
//
// In cluster mode the local tables are altered ON CLUSTER (one replica of
// each shard runs it; replication brings it to the others). A Distributed
// table is not replicated, and ON CLUSTER refuses to ALTER it on a cluster
// whose shards replicate themselves (internal_replication), so each host
// alters its own.
func (m *migrator) addColumn(ctx context.Context, table, name, typ, after string) error {
	if err := m.addColumnOn(ctx, m.conn, m.ddl.LocalName(table), name, typ, after, m.ddl.OnCluster()); err != nil {
		return err
	}
	if !m.ddl.Clustered() {
		return nil
	}
	return m.onEachHost(ctx, func(conn driver.Conn) error {
		return m.addColumnOn(ctx, conn, table, name, typ, after, "")
	})
}

func (m *migrator) addColumnOn(ctx context.Context, conn chconn.Querier, table, name, typ, after, onCluster string) error {
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name = ?",
		m.ddl.Database(), table, name).Scan(&n); err != nil {
		return fmt.Errorf("look for column %s.%s: %w", table, name, err)
	}
	if n > 0 {
		return nil
	}
	q := fmt.Sprintf("ALTER TABLE %s%s ADD COLUMN %s %s", m.ddl.Table(table), onCluster, name, typ)
	if after != "" {
		q += " AFTER " + after
	}
	if err := ExecDDL(ctx, conn, q); err != nil {
		return fmt.Errorf("add column %s.%s: %w", table, name, err)
	}
	return nil
}
