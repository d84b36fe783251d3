package schema

import (
	"fmt"
)

// Compact storage where the server has codecs: each column of
// message_read_snapshots compressed by what suits its values under the
// sort key (project_id, snapshot_at, message_id). Neighbouring rows are a
// project snapshot's messages, so the times (one per project snapshot)
// shrink to nothing under Delta, and the counts, which repeat a message's
// value of a snapshot before, 50 or so rows back, shrink under ZSTD, which
// finds them there; Delta or T64 would see only the next message's
// unrelated count. ZSTD(1) does badly on such columns (a level 3 or more
// finds the repeats). BENCHMARKS.md has the bytes a row, by column.
//
// A codec changes no type: percent stays Float64, so a value such as
// 12.34 is stored exactly however it is inserted, and the spool's entries
// of every release deliver as they did. Changing a column's codec changes
// its metadata alone: the parts written before keep theirs until a merge
// writes them again, and no mutation runs.

// snapshotCodecs are the codecs of message_read_snapshots's columns.
func snapshotCodecs() []struct{ column, codec string } {
	return []struct{ column, codec string }{
		{"project_id", "ZSTD(3)"},
		{"message_id", "ZSTD(9)"},
		{"snapshot_at", "Delta, ZSTD(3)"},
		{"read_count", "ZSTD(9)"},
		{"total", "ZSTD(9)"},
		{"percent", "ZSTD(9)"},
		{"fetched_at", "Delta, ZSTD(3)"},
		{"version", "Delta, ZSTD(3)"},
		{"schedule", "ZSTD(3)"},
	}
}

// rollupCodecs are the codecs of the rollups' states of a message's row
// (SnapshotRow), which materialized views fill from every snapshot
// written: binary strings of fixed layout, which ZSTD shrinks to what
// changed between neighbouring messages and hours.
func rollupCodecs() []struct{ table, column, typ string } {
	return []struct{ table, column, typ string }{
		{LatestRollup, "latest_row", "AggregateFunction(max, String)"},
		{DailyRollup, "day_row", "AggregateFunction(max, String)"},
		{HourlyRollup, "hour_row", "AggregateFunction(max, String)"},
	}
}

// RollupCodecDDL sets the codecs of the rollups' states.
func RollupCodecDDL(d DDL) []string {
	var stmts []string
	for _, c := range rollupCodecs() {
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s%s MODIFY COLUMN %s %s CODEC(ZSTD(3))", d.Local(c.table), d.OnCluster(), c.column, c.typ))
	}
	return stmts
}

// CodecDDL sets the codecs of the snapshot table whose rows a host holds
// in table, quoted and qualified, keeping each column's type.
func CodecDDL(d DDL, table string) []string {
	types := map[string]string{}
	for _, c := range SnapshotsTable.Def().columns {
		types[c.Name] = c.Type
	}
	var stmts []string
	for _, c := range snapshotCodecs() {
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s%s MODIFY COLUMN %s %s CODEC(%s)", table, d.OnCluster(), c.column, types[c.column], c.codec))
	}
	return stmts
}
