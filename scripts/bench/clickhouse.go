package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/scripts/internal/benchdb"
)

// clickHouse is the bench's own connection, for preparing the database and
// reading counters; readsync opens its own.
type clickHouse struct {
	conn driver.Conn
}

func openClickHouse(ctx context.Context, dsn string) (*clickHouse, error) {
	conn, err := benchdb.Open(ctx, dsn, "")
	if err != nil {
		return nil, err
	}
	return &clickHouse{conn: conn}, nil
}

// Close closes the connection.
func (c *clickHouse) Close() error { return c.conn.Close() }

func (c *clickHouse) exec(ctx context.Context, q string) error {
	if err := c.conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("ClickHouse %q: %w", q, err)
	}
	return nil
}

// number runs a query that returns one UInt64.
func (c *clickHouse) number(ctx context.Context, q string) (uint64, error) {
	var n uint64
	if err := c.conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("ClickHouse %q: %w", q, err)
	}
	return n, nil
}

func (c *clickHouse) version(ctx context.Context) (string, error) {
	return benchdb.Version(ctx, c.conn)
}

// insertQueries reads the server's InsertQuery counter. system.events lists
// only events that happened, hence the sum: 0 on a server that has not
// inserted yet.
func (c *clickHouse) insertQueries(ctx context.Context) (uint64, error) {
	return c.number(ctx, "SELECT toUInt64(sum(value)) FROM system.events WHERE event = 'InsertQuery'")
}

// count fills in r the rows and snapshots in the database, which was empty
// before the run, and the blocks its tables received. Every INSERT into a
// MergeTree table takes the next block number of that table (the snapshots
// of a pass share one month partition), so the highest block number per
// table counts this database's INSERTs whatever else the server does. The
// rollups that materialized views fill take a block with each INSERT into
// message_read_snapshots and are not counted again.
func (c *clickHouse) count(ctx context.Context, db string, r *result) error {
	var err error
	for _, t := range []string{"projects", "messages", "message_read_snapshots"} {
		n, cerr := c.number(ctx, fmt.Sprintf("SELECT count() FROM %s.%s", db, t))
		err = errors.Join(err, cerr)
		r.rows += n
		if t == "message_read_snapshots" {
			r.snapshots = n
		}
	}
	blocks, berr := c.number(ctx, fmt.Sprintf(`SELECT toUInt64(sum(b)) FROM
		(SELECT table, max(max_block_number) AS b FROM system.parts WHERE database = '%s'
		AND table IN ('projects', 'messages', 'message_read_snapshots', 'sync_runs', 'project_read_day_rollup',
		'project_read_gain_rollup', 'project_read_day_gain_rollup') GROUP BY table)`, db))
	r.blocks = blocks
	return errors.Join(err, berr)
}
