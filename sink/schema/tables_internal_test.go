package schema

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
)

// jsonNames returns the JSON names of a row struct's fields, in field
// order.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

func columnNames[R any](t *table[R]) []string {
	var names []string
	for _, c := range t.columns {
		names = append(names, c.name)
	}
	return names
}

// The spool and the dry-run output write rows by their structs' JSON tags,
// ClickHouse by the table descriptions: each column must be one field of
// the same name, and each field one column. Snapshot's fields are ordered
// to pack the struct, not as the columns; JSON is read by name, so only
// the names must agree. A batch column is a field of the batch, which the
// spool keeps with the rows.
func TestTablesMatchRowJSON(t *testing.T) {
	for _, tt := range []struct {
		table   string
		columns []string
		row     reflect.Type
	}{
		{ProjectsTable.name, columnNames(ProjectsTable), reflect.TypeFor[sink.Project]()},
		{MessagesTable.name, columnNames(MessagesTable), reflect.TypeFor[sink.Message]()},
		{SnapshotsTable.name, columnNames(SnapshotsTable), reflect.TypeFor[sink.Snapshot]()},
		{RunsTable.name, columnNames(RunsTable), reflect.TypeFor[sink.Run]()},
	} {
		t.Run(tt.table, func(t *testing.T) {
			fields := jsonNames(tt.row)
			if got, want := slices.Sorted(slices.Values(tt.columns)), slices.Sorted(slices.Values(fields)); !slices.Equal(got, want) {
				t.Errorf("columns %q\nbut %s has JSON fields %q", tt.columns, tt.row.Name(), fields)
			}
			if len(slices.Compact(slices.Sorted(slices.Values(tt.columns)))) != len(tt.columns) {
				t.Errorf("a column is declared twice: %q", tt.columns)
			}
		})
	}
	batchFields := map[string]bool{}
	for i := range reflect.TypeFor[sink.Batch]().NumField() {
		batchFields[reflect.TypeFor[sink.Batch]().Field(i).Name] = true
	}
	for _, c := range SnapshotsTable.batchColumns {
		if name := strings.ToUpper(c.name[:1]) + c.name[1:]; !batchFields[name] {
			t.Errorf("batch column %s: Batch has no field %s to keep it in the spool", c.name, name)
		}
	}
}

// The single-server DDL is the previous release's, column for column, with
// the columns added since at the end, and cluster mode differs only in
// where the rows live.
func TestCreateTableStatements(t *testing.T) {
	single := DDL{Names: chconn.NewNames("d", chconn.Topology{})}
	got := single.CreateTable(SnapshotsTable.Def())
	want := "CREATE TABLE IF NOT EXISTS `d`.`message_read_snapshots` (\n    project_id Int64,\n    message_id Int64,\n    snapshot_at DateTime,\n" +
		"    read_count UInt64,\n    total UInt64,\n    percent Float64,\n    fetched_at DateTime,\n    version UInt64,\n    schedule String\n) ENGINE = ReplacingMergeTree(version)\n" +
		"PARTITION BY toYYYYMM(snapshot_at)\nORDER BY (project_id, snapshot_at, message_id)"
	if len(got) != 1 || got[0] != want {
		t.Errorf("single server:\n%s\nwant\n%s", strings.Join(got, "\n;\n"), want)
	}
	cluster := DDL{Names: chconn.NewNames("d", chconn.Topology{Cluster: "c"})}
	got = cluster.CreateTable(RunsTable.Def())
	if len(got) != 2 {
		t.Fatalf("cluster mode: %d statements, want the local table and the Distributed one", len(got))
	}
	for i, want := range []string{
		"CREATE TABLE IF NOT EXISTS `d`.`sync_runs_local` ON CLUSTER `c` (",
		"CREATE TABLE IF NOT EXISTS `d`.`sync_runs` ON CLUSTER `c` (",
	} {
		if !strings.HasPrefix(got[i], want) {
			t.Errorf("statement %d:\n%s\nwant it to start with %s", i, got[i], want)
		}
	}
	for i, want := range []string{
		"ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')\nPARTITION BY",
		"ENGINE = Distributed(`c`, `d`, `sync_runs_local`, cityHash64(run_id))",
	} {
		if !strings.Contains(got[i], want) {
			t.Errorf("statement %d:\n%s\nwant %s", i, got[i], want)
		}
	}
	got = DDL{Names: chconn.NewNames("d", chconn.Topology{Cluster: "c", ReplicaPath: "/p/{table}"})}.CreateTable(ProjectsTable.Def())
	if want := "ENGINE = ReplicatedReplacingMergeTree('/p/{table}', '{replica}', version)"; !strings.Contains(got[0], want) {
		t.Errorf("%s\nwant %s", got[0], want)
	}
	if want := fmt.Sprintf("cityHash64(%s)", "id"); !strings.Contains(got[1], want) {
		t.Errorf("%s\nwant sharding by %s", got[1], want)
	}
}

// The speed rollup packs each value into a place of its own: a slot of
// speed_values (or speed_share_24h), a bit of speed_nulls for each value
// that can be NULL, and a row packed in Go reads back, value by value, as
// the row it was: what the ALIAS columns read.
func TestSpeedValuesPackedEachInAPlaceOfItsOwn(t *testing.T) {
	slots, bits := map[int]string{}, map[int]string{}
	for _, f := range speedFields {
		if prev, ok := slots[f.slot]; ok {
			t.Errorf("%s and %s share slot %d", prev, f.name, f.slot)
		}
		slots[f.slot] = f.name
		if f.slot < 0 || f.slot > speedSlots {
			t.Errorf("%s: slot %d outside speed_values' %d", f.name, f.slot, speedSlots)
		}
		if f.null >= 16 {
			t.Errorf("%s: bit %d outside speed_nulls", f.name, f.null)
		}
		if f.null >= 0 {
			if prev, ok := bits[f.null]; ok {
				t.Errorf("%s and %s share NULL bit %d", prev, f.name, f.null)
			}
			bits[f.null] = f.name
		}
		if strings.HasPrefix(f.typ, "Nullable(") != (f.null >= 0) {
			t.Errorf("%s %s: NULL bit %d", f.name, f.typ, f.null)
		}
	}
	if len(slots) != speedSlots+1 {
		t.Errorf("%d slots used, speed_values has %d (and the share its own)", len(slots)-1, speedSlots)
	}
	if got := speedFields[speedBeforeVersion-1].name; got != "nine_tenths_after_hours_max" {
		t.Errorf("version follows %s, want nine_tenths_after_hours_max", got)
	}

	u := func(v uint64) *uint64 { return &v }
	h := func(v uint32) *uint32 { return &v }
	share := 0.25
	row := SpeedRow{FirstSeenAgeHours: 1, ReadsAt: [5]*uint64{u(2), nil, u(0), u(4), nil}, LatestReads: 5, Share24h: &share,
		Shares:   [2]SpeedShare{{AfterMin: nil, AfterMax: h(6), Age: 7, Reads: 8, Between: 9}, {AfterMin: h(10), AfterMax: h(11), Age: 12, Reads: 13, Between: 14}},
		FirstAge: 15, LatestAge: 16, LatestAt: 17, LatestVersion: 18}
	values, nulls := speedPacked(&row), speedNulls(&row)
	for _, f := range speedFields {
		want, ok := f.get(&row)
		isNull := f.null >= 0 && nulls&(1<<f.null) != 0
		if isNull == ok {
			t.Errorf("%s: NULL %v, want %v", f.name, isNull, !ok)
		}
		if f.slot > 0 && ok && values[f.slot-1] != want {
			t.Errorf("%s: packed %d, want %d", f.name, values[f.slot-1], want)
		}
	}
	if nulls != 1<<1|1<<4|1<<6 {
		t.Errorf("speed_nulls %b, want reads_6h, reads_7d and half_after_hours_min", nulls)
	}
}
