package chconn

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
)

// Server is the ClickHouse server readsync writes to, as read once when it
// first answers: its version and what it supports. Whatever readsync does
// differently by server is decided from a Server, here and in
// capabilities_1816.go: by asking the server what it has (system.settings,
// system.merge_tree_settings) where it can, and by the version only where
// nothing can be asked, with the reason next to the threshold.
//
// A database must not change behaviour when its server is upgraded: what
// a migration created on an older server stays as it is, and the views
// read it the same way. A capability may only change how new statements
// are sent, never what an existing table means.
type Server struct {
	// Version is the server's version, e.g. 26.7.2 (the handshake gives
	// three parts).
	Version proto.Version
	// Release is version() as the server reports it, e.g. 26.7.2.1.
	Release string
	// has holds the names, among those readsync asks about, of the query
	// settings and MergeTree settings the server knows.
	has []string
}

// pinnedSetting is a query setting readsync's exactly-once delivery rests
// on, and the value it needs.
type pinnedSetting struct {
	name  string
	value int
}

// pinnedInsertSettings are the query settings every INSERT of rows
// carries, with these values, on a server that knows them: neither the
// server's defaults, which change between releases, nor a user's profile
// or DSN may decide them. A retry and a spool replay send the same rows
// with the same token (dedup.go); what the server does with them then
// rests on these.
func pinnedInsertSettings() []pinnedSetting {
	return []pinnedSetting{
		// A replicated table drops a block it has taken already, by the
		// INSERT's token or else by the block's digest: what makes a
		// repeated INSERT harmless on a cluster of 18.16. Off, the
		// repeat adds its rows again there, to the table and its views.
		{"insert_deduplicate", 1},
		// Each materialized view's target judges a retried block by
		// itself, and drops it only if it took it: a view that failed at
		// the first try gets the rows, one that took them keeps them
		// once. Off, a retried block the table drops goes to every view
		// again (checked on 26.7), and a target that took it at the first
		// try holds it twice. 18.16 does not know it.
		{"deduplicate_blocks_in_dependent_materialized_views", 1},
		// A view that fails fails the INSERT, which readsync then retries
		// or spools. On, the INSERT is confirmed and the view never gets
		// the rows.
		{"materialized_views_ignore_errors", 0},
		// The server answers once the rows are in the table and its
		// views, so an INSERT confirmed is written and one that failed
		// says so. An asynchronous INSERT can be confirmed before it is
		// written (wait_for_async_insert = 0) and fail unseen; readsync
		// makes its batches large itself.
		{"async_insert", 0},
	}
}

// oldestTested is the oldest ClickHouse release the tests run on; readsync
// warns about an older server, whose SQL dialect it has never been run
// against.
var oldestTested = proto.Version{Major: 18, Minor: 16, Patch: 1}

// String is the release, e.g. "26.7.2.1".
func (s Server) String() string { return s.Release }

// Tested reports whether the server is at least the oldest release the
// tests run on.
func (s Server) Tested() bool { return proto.CheckMinVersion(oldestTested, s.Version) }

// Server returns the server readsync writes to, read on the first call
// that reaches it and kept for the connection's life.
func (c *Conn) Server(ctx context.Context) (Server, error) {
	c.serverMu.Lock()
	defer c.serverMu.Unlock()
	if c.server != nil {
		return *c.server, nil
	}
	s, err := readServer(ctx, c)
	if err != nil {
		return Server{}, c.Redact(err)
	}
	c.server = &s
	if !s.Tested() {
		c.log.Warn("ClickHouse is older than the oldest release readsync is tested on", "server", s.Release, "oldest_tested", oldestTested.String())
	} else {
		c.log.Info("ClickHouse server", "server", s.Release, "dedup_tokens", s.DedupTokens(), "insert_settings", s.pinnedNames())
	}
	return s, nil
}

func readServer(ctx context.Context, c *Conn) (Server, error) {
	if err := c.conn.Ping(ctx); err != nil {
		return Server{}, fmt.Errorf("ping ClickHouse: %w", err)
	}
	v, err := c.conn.ServerVersion()
	if err != nil {
		return Server{}, fmt.Errorf("ClickHouse server version: %w", err)
	}
	s := Server{Version: v.Version}
	if err := c.conn.QueryRow(ctx, "SELECT version()").Scan(&s.Release); err != nil {
		return Server{}, fmt.Errorf("ClickHouse server version: %w", err)
	}
	if s.has, err = readCapabilities(ctx, c); err != nil {
		return Server{}, err
	}
	return s, nil
}
