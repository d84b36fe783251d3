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
	return WithSettings(ctx, clickhouse.Settings{"insert_distributed_sync": 1})
}

// insertSettings are the settings of every INSERT of rows into server s:
// those its exactly-once delivery rests on that s knows (see
// pinnedInsertSettings), and in cluster mode insert_distributed_sync (see
// SyncInserts).
func (c *Conn) insertSettings(s Server) clickhouse.Settings {
	out := s.pinned()
	if c.names.Clustered() {
		out["insert_distributed_sync"] = 1
	}
	return out
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
