package chconn

import (
	"context"
	"maps"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// SyncInserts makes INSERTs through a Distributed table return only once
// every shard has its rows, so that a batch taken out of the spool is on
// the cluster, not in a queue on the host that received it.
func (c *Conn) SyncInserts(ctx context.Context) context.Context {
	if !c.names.Clustered() {
		return ctx
	}
	return WithSettings(ctx, c.insertSettings())
}

// insertSettings are the settings of every INSERT: in cluster mode,
// insert_distributed_sync (see SyncInserts).
func (c *Conn) insertSettings() clickhouse.Settings {
	s := clickhouse.Settings{}
	if c.names.Clustered() {
		s["insert_distributed_sync"] = 1
	}
	return s
}

// settingsKey carries the settings readsync gave a context's queries, so
// that giving one more keeps the others: clickhouse-go's WithSettings
// replaces them all.
type settingsKey struct{}

// WithSettings returns ctx whose queries carry s, besides the settings
// ctx gives them already.
func WithSettings(ctx context.Context, s clickhouse.Settings) context.Context {
	merged := clickhouse.Settings{}
	if prev, ok := ctx.Value(settingsKey{}).(clickhouse.Settings); ok {
		maps.Copy(merged, prev)
	}
	maps.Copy(merged, s)
	return clickhouse.Context(context.WithValue(ctx, settingsKey{}, merged), clickhouse.WithSettings(merged))
}
