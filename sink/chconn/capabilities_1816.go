package chconn

// What readsync asks a server before it relies on a setting: 18.16 knows
// neither deduplication tokens nor most of the settings every INSERT pins,
// so readsync reads which of them the server has and sets only those. A
// current release alone would have them all: every INSERT would set every
// pinned setting, migration 4 (whose requires asks DedupTokens) would apply
// at once, and none of this would be read.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// The settings readsync asks a server about.
const (
	// settingDedupToken makes an INSERT carry its own deduplication token.
	settingDedupToken = "insert_deduplication_token"
	// SettingDedupWindow is the MergeTree setting with which a table that
	// is not replicated remembers the tokens of its last INSERTs.
	SettingDedupWindow = "non_replicated_deduplication_window"
	// settingCodecs is listed by every release that takes per-column
	// codecs such as CODEC(Delta, ZSTD(3)) (since 20.1; 18.16 refuses
	// the clause).
	settingCodecs = "allow_suspicious_codecs"
	// settingLightweightDeletes is listed by every release whose DELETE
	// FROM marks rows deleted instead of rewriting the parts that hold
	// them, and waits for the marks as this setting says (since 24.4;
	// 18.16 has only ALTER TABLE … DELETE).
	settingLightweightDeletes = "lightweight_deletes_sync"
	// settingFilterPushDown is listed by every release that plans a
	// query in steps and pushes a filter down through them, a join's
	// sides included (the current release here; 18.16 pushes a WHERE
	// into a subquery only on the left of a join).
	settingFilterPushDown = "query_plan_filter_push_down"
)

// readCapabilities reads which of the settings readsync asks about the
// server knows, query settings and MergeTree settings alike.
func readCapabilities(ctx context.Context, c *Conn) ([]string, error) {
	// Names as literals: servers bind a slice parameter differently.
	names := []string{QuoteString(settingDedupToken), QuoteString(settingCodecs), QuoteString(settingLightweightDeletes), QuoteString(settingFilterPushDown)}
	for _, p := range pinnedInsertSettings() {
		names = append(names, QuoteString(p.name))
	}
	settings, err := QueryColumn[string](ctx, c.conn, "SELECT name FROM system.settings WHERE name IN ("+strings.Join(names, ", ")+")")
	if err != nil {
		return nil, fmt.Errorf("read system.settings: %w", err)
	}
	// system.merge_tree_settings exists on every tested release.
	mt, err := QueryColumn[string](ctx, c.conn, "SELECT name FROM system.merge_tree_settings WHERE name = "+QuoteString(SettingDedupWindow))
	if err != nil {
		return nil, fmt.Errorf("read system.merge_tree_settings: %w", err)
	}
	return append(settings, mt...), nil
}

// DedupTokens reports whether a table that is not replicated can drop an
// INSERT it has already taken, by the token the INSERT carries: both
// settings are needed, the table's window and the query's token. 18.16 has
// neither.
func (s Server) DedupTokens() bool {
	return slices.Contains(s.has, settingDedupToken) && slices.Contains(s.has, SettingDedupWindow)
}

// Codecs reports whether the server takes per-column compression codecs.
// 18.16 does not.
func (s Server) Codecs() bool { return slices.Contains(s.has, settingCodecs) }

// LightweightDeletes reports whether the server deletes rows by marking
// them (DELETE FROM): the parts that hold them gain a mask of the rows that
// remain, and keep the files of their columns, rows of other keys
// included. ALTER TABLE … DELETE writes every part that holds a deleted
// row again, whole. 18.16 has only the latter.
func (s Server) LightweightDeletes() bool { return slices.Contains(s.has, settingLightweightDeletes) }

// NarrowsJoins reports whether a range of a view's key, in a WHERE over
// the view, narrows the reads of the subqueries the view joins as well as
// those of its own rows. On 18.16 it narrows the latter only: a view that
// joins the projects' names reads the projects table whole for every
// read, however few projects it is asked for.
func (s Server) NarrowsJoins() bool { return slices.Contains(s.has, settingFilterPushDown) }

// pinned returns the settings of pinnedInsertSettings the server knows,
// with the values readsync needs.
func (s Server) pinned() clickhouse.Settings {
	out := clickhouse.Settings{}
	for _, p := range pinnedInsertSettings() {
		if slices.Contains(s.has, p.name) {
			out[p.name] = p.value
		}
	}
	return out
}

// pinnedNames lists, in order, the settings every INSERT of rows sets on
// the server, as name=value.
func (s Server) pinnedNames() string {
	var out []string
	for _, p := range pinnedInsertSettings() {
		if slices.Contains(s.has, p.name) {
			out = append(out, fmt.Sprintf("%s=%d", p.name, p.value))
		}
	}
	return strings.Join(out, ",")
}
