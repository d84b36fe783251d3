// Package schema is readsync's schema in ClickHouse, declared: its
// tables and their columns, the views' SQL, the encodings of the rows the
// rollups keep, and the DDL of each, rendered for a database and topology
// without a server. Package migrate brings a database to it, and package
// resort moves the snapshot table of an earlier release onto its sort
// key; schema imports neither, and computes no derived rows (package
// derived does).
package schema

import (
	"strings"

	"github.com/readsync/readsync/sink"
)

// column is one column of a table: its name, its ClickHouse type and how to
// read its value from a row. The name is also the JSON name of the row
// struct's field, which the spool and dry-run output use (a test holds the
// two together).
type column[R any] struct {
	name  string
	typ   string
	value func(*R) any
}

// table is one of readsync's data tables, declared once: the DDL, the
// INSERT's column list and the values appended for each row all derive
// from it, so a column cannot be added, removed or moved in one place and
// not the others. It is the chconn.Table that INSERTs of its rows take.
type table[R any] struct {
	name    string
	columns []column[R]
	// batchColumns follow columns; each row of a write takes their values
	// from the write's batch.
	batchColumns []batchColumn
	// aliases follow the batch columns in the DDL: columns computed from
	// the others at each read, never written.
	aliases []aliasColumn
	layout  layout
}

// aliasColumn is an ALIAS column: its name, its type and the expression
// over the table's other columns it reads as.
type aliasColumn struct{ name, typ, expr string }

// batchColumn is a column whose value is a fact of a whole write rather
// than of each row, such as the schedule whose pass fetched the rows: the
// batch (and its spool entry) carries it once, not every row in memory.
type batchColumn struct {
	name  string
	typ   string
	value func(*sink.Batch) any
}

// layout is how a table is stored.
type layout struct {
	// engine is the single-server engine; cluster mode uses its Replicated
	// form.
	engine      engine
	partitionBy string
	orderBy     string
	// shardBy is the expression whose hash picks a row's shard in cluster
	// mode.
	shardBy string
	// granularity, when set, is the table's index_granularity instead of
	// the server's 8 192 rows: a table read a project's few latest rows at
	// a time costs a granule per read, whatever its size.
	granularity int
}

// engine is a MergeTree-family engine and its arguments.
type engine struct {
	name string // e.g. ReplacingMergeTree
	args string // e.g. version; empty for none
}

// ColumnDef is a column's name and type, what DDL needs of it.
type ColumnDef struct{ Name, Type string }

// TableDef is a table as DDL sees it, whatever its row type: what
// DDL.CreateTable renders. Its parts are declared in this package only.
type TableDef struct {
	name    string
	columns []ColumnDef
	aliases []aliasColumn
	layout  layout
}

// Def is the table as DDL sees it: its columns, then its batch columns,
// then its ALIAS columns.
func (t *table[R]) Def() TableDef {
	cols := make([]ColumnDef, 0, len(t.columns)+len(t.batchColumns))
	for _, c := range t.columns {
		cols = append(cols, ColumnDef{c.name, c.typ})
	}
	for _, c := range t.batchColumns {
		cols = append(cols, ColumnDef{c.name, c.typ})
	}
	return TableDef{name: t.name, columns: cols, aliases: t.aliases, layout: t.layout}
}

// Name is the table's name in its database.
func (t *table[R]) Name() string { return t.name }

// ColumnList is the INSERT's column list: "a, b, c".
func (t *table[R]) ColumnList() string {
	names := make([]string, 0, len(t.columns)+len(t.batchColumns))
	for _, c := range t.Def().columns {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

// RowValues appends the values of the row r's columns to vals, in column
// order.
func (t *table[R]) RowValues(vals []any, r *R) []any {
	for _, c := range t.columns {
		vals = append(vals, c.value(r))
	}
	return vals
}

// BatchValues appends to vals the values of the batch columns of the
// batch b (nil for rows that come without one, such as run records), in
// column order: they follow the row's in an INSERT.
func (t *table[R]) BatchValues(vals []any, b *sink.Batch) []any {
	for _, c := range t.batchColumns {
		vals = append(vals, c.value(b))
	}
	return vals
}

// The tables. They are declarations, never modified. The version columns
// are UInt64 nanoseconds: a DateTime version would tie when two passes
// write one key within a second, and ReplacingMergeTree would then keep
// either row.
var (
	// ProjectsTable holds the projects, a row per write of each.
	ProjectsTable = &table[sink.Project]{
		name: "projects",
		columns: []column[sink.Project]{
			{"id", "Int64", func(p *sink.Project) any { return p.ID }},
			{"nft", "String", func(p *sink.Project) any { return p.NFT }},
			{"name", "String", func(p *sink.Project) any { return p.Name }},
			{"description", "String", func(p *sink.Project) any { return p.Description }},
			{"logo", "String", func(p *sink.Project) any { return p.Logo }},
			{"type", "Int64", func(p *sink.Project) any { return p.Type }},
			{"wallet_address", "String", func(p *sink.Project) any { return p.WalletAddress }},
			{"create_at", "DateTime", func(p *sink.Project) any { return p.CreateAt.Time() }},
			{"raw", "String", func(p *sink.Project) any { return p.Raw }},
			{"fetched_at", "DateTime", func(p *sink.Project) any { return p.FetchedAt.Time() }},
			{"version", "UInt64", func(p *sink.Project) any { return p.Version }},
		},
		layout: layout{engine: engine{"ReplacingMergeTree", "version"}, orderBy: "id", shardBy: "id"},
	}

	// MessagesTable holds the projects' messages, a row per write of each.
	MessagesTable = &table[sink.Message]{
		name: "messages",
		columns: []column[sink.Message]{
			{"project_id", "Int64", func(m *sink.Message) any { return m.ProjectID }},
			{"id", "Int64", func(m *sink.Message) any { return m.ID }},
			{"sender", "String", func(m *sink.Message) any { return m.Sender }},
			{"recv_group", "String", func(m *sink.Message) any { return m.RecvGroup }},
			{"receivers", "Array(String)", func(m *sink.Message) any { return receivers(m.Receivers) }},
			{"subject", "String", func(m *sink.Message) any { return m.Subject }},
			{"type", "Int64", func(m *sink.Message) any { return m.Type }},
			{"is_all_subscribers", "UInt8", func(m *sink.Message) any { return boolToUInt8(m.IsAllSubscribers) }},
			{"create_at", "DateTime", func(m *sink.Message) any { return m.CreateAt.Time() }},
			{"fetched_at", "DateTime", func(m *sink.Message) any { return m.FetchedAt.Time() }},
			{"version", "UInt64", func(m *sink.Message) any { return m.Version }},
		},
		layout: layout{engine: engine{"ReplacingMergeTree", "version"}, orderBy: "(project_id, id)", shardBy: "project_id"},
	}

	// SnapshotsTable is message_read_snapshots: the messages' read
	// statistics at each snapshot, a row per write of each.
	SnapshotsTable = &table[sink.Snapshot]{
		name: "message_read_snapshots",
		columns: []column[sink.Snapshot]{
			{"project_id", "Int64", func(s *sink.Snapshot) any { return s.ProjectID }},
			{"message_id", "Int64", func(s *sink.Snapshot) any { return s.MessageID }},
			{"snapshot_at", "DateTime", func(s *sink.Snapshot) any { return s.SnapshotAt.Time() }},
			{"read_count", "UInt64", func(s *sink.Snapshot) any { return s.ReadCount }},
			{"total", "UInt64", func(s *sink.Snapshot) any { return s.Total }},
			{"percent", "Float64", func(s *sink.Snapshot) any { return s.Percent }},
			{"fetched_at", "DateTime", func(s *sink.Snapshot) any { return s.FetchedAt.Time() }},
			{"version", "UInt64", func(s *sink.Snapshot) any { return s.Version }},
		},
		batchColumns: []batchColumn{
			// The schedule whose pass wrote the rows, empty for a
			// backfill: reads gained count the ticks a project missed by
			// it, so it is stored with the rows it describes. Migration 7
			// added it; rows written before have none.
			{"schedule", "String", func(b *sink.Batch) any { return b.Schedule }},
		},
		layout: layout{
			engine:      engine{"ReplacingMergeTree", "version"},
			partitionBy: "toYYYYMM(snapshot_at)",
			orderBy:     "(project_id, snapshot_at, message_id)",
			shardBy:     "project_id",
		},
	}

	// RunsTable is sync_runs, the record of every pass and tick. It is
	// sharded by run_id rather than at random: a run record replayed from
	// the spool after an INSERT whose answer was lost goes to the same
	// shard, where the replicated engine drops the identical block instead
	// of keeping a second row.
	RunsTable = &table[sink.Run]{
		name: "sync_runs",
		columns: []column[sink.Run]{
			{"run_id", "String", func(r *sink.Run) any { return r.RunID }},
			{"schedule", "String", func(r *sink.Run) any { return r.Schedule }},
			{"trigger", "String", func(r *sink.Run) any { return r.Trigger }},
			{"snapshot_at", "DateTime", func(r *sink.Run) any { return r.SnapshotAt }},
			{"started_at", "DateTime", func(r *sink.Run) any { return r.StartedAt }},
			{"finished_at", "DateTime", func(r *sink.Run) any { return r.FinishedAt }},
			{"nft_total", "UInt64", func(r *sink.Run) any { return r.NFTTotal }},
			{"nft_ok", "UInt64", func(r *sink.Run) any { return r.NFTOK }},
			{"nft_failed", "UInt64", func(r *sink.Run) any { return r.NFTFailed }},
			{"messages", "UInt64", func(r *sink.Run) any { return r.Messages }},
			{"status", "String", func(r *sink.Run) any { return r.Status }},
			{"error", "String", func(r *sink.Run) any { return r.Error }},
			{"shard", "String", func(r *sink.Run) any { return r.Shard }},
		},
		layout: layout{
			engine:      engine{"MergeTree", ""},
			partitionBy: "toYYYYMM(started_at)",
			orderBy:     "(started_at, run_id)",
			shardBy:     "run_id",
			granularity: FineGranularity,
		},
	}
)

func boolToUInt8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// receivers never hands the driver a nil slice, which it would reject for
// an Array column on some versions.
func receivers(r []string) []string {
	if r == nil {
		return []string{}
	}
	return r
}
