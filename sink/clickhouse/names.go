package clickhouse

import (
	"context"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/readsync/readsync/sink/chconn"
)

// QueryNames runs a schedule's nft_names_query and hands fn each value of
// its one String column as it is read (see sync.NameQuerier). The query
// runs read-only (the setting readonly = 2: no INSERT, no DDL, settings
// allowed), as the DSN's user, on the server's default database: name a
// table with its database. A query of another shape is an error that says
// what it returned.
func (c *ClickHouse) QueryNames(ctx context.Context, query string, fn func(string) error) error {
	ctx = chconn.WithSettings(ctx, clickhouse.Settings{"readonly": 2})
	rows, err := c.conn.Query(ctx, query)
	if err != nil {
		return c.conn.Redact(err)
	}
	defer rows.Close()
	cols := rows.ColumnTypes()
	if len(cols) != 1 {
		desc := make([]string, len(cols))
		for i, col := range cols {
			desc[i] = col.Name() + " " + col.DatabaseTypeName()
		}
		return fmt.Errorf("returns %d columns (%s); want one String column", len(cols), strings.Join(desc, ", "))
	}
	if t := cols[0].DatabaseTypeName(); t != "String" && t != "LowCardinality(String)" {
		return fmt.Errorf("returns column %s of type %s; want one String column (toString() converts)", cols[0].Name(), t)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return c.conn.Redact(err)
		}
		if err := fn(name); err != nil {
			return err
		}
	}
	return c.conn.Redact(rows.Err())
}
