package app

import (
	"context"
	"fmt"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
)

// openClickHouse connects to ClickHouse with the configured topology;
// migrations log through the process logger. A DSN on ClickHouse's HTTP
// port is refused first (a *chconn.HTTPPortError): the driver would only
// time out on it.
func (a *app) openClickHouse(ctx context.Context, opts ...clickhouse.Option) (*clickhouse.ClickHouse, error) {
	if err := a.cfg.DSN.CheckNativePort(ctx); err != nil {
		return nil, err
	}
	opts = append([]clickhouse.Option{clickhouse.WithTopology(a.cfg.Topology), clickhouse.WithLogger(a.log)}, opts...)
	return clickhouse.OpenClickHouse(ctx, a.cfg.DSN, opts...)
}

// migrate applies the pending migrations and exits: 0 when the schema is
// current, 1 when a migration failed (the error names it). It is for an
// init container or a Job that upgrades the schema before the daemons
// start; the daemon and backfills would do the same at start.
func (a *app) migrate(ctx context.Context) int {
	ch, err := a.openClickHouse(ctx)
	if err != nil {
		return a.configFailed(fmt.Errorf("READSYNC_CLICKHOUSE_DSN: %w", err))
	}
	defer ch.Close()
	if err := ch.Migrate(ctx); err != nil {
		fmt.Fprintf(a.stderr, "readsync: migrate: %s\n", sink.Describe(err))
		return ExitFailed
	}
	v, err := ch.SchemaVersion(ctx)
	if err != nil {
		fmt.Fprintf(a.stderr, "readsync: migrate: %v\n", err)
		return ExitFailed
	}
	fmt.Fprintf(a.stdout, "clickhouse: database %q at schema version %d, current\n", ch.Database(), v.Applied)
	return ExitOK
}
