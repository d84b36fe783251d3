package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/sinktest"
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

// A row with a different value in every column comes back from ClickHouse
// with each value under the column its JSON field names. A description
// that reads the wrong field for a column (two String columns swapped, say)
// fails here, since the expectation comes from the JSON tags, not from the
// description.
func TestTablesRoundTripByColumnName(t *testing.T) {
	db := sinktest.New(t)
	dsn, err := chconn.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ch, err := OpenClickHouse(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })

	at := func(h int) time.Time { return time.Date(2026, 4, 5, h, 7, 8, 0, time.UTC) }
	b := &sink.Batch{
		Projects: []sink.Project{{ID: 101, NFT: "nft", Name: "name", Description: "description", Logo: "logo", Type: 102,
			WalletAddress: "wallet_address", CreateAt: sink.TimeOf(at(1)), Raw: "raw", FetchedAt: sink.TimeOf(at(2)), Version: 103}},
		Messages: []sink.Message{{ProjectID: 201, ID: 202, Sender: "sender", RecvGroup: "recv_group", Receivers: []string{"r1", "r2"},
			Subject: "subject", Type: 203, IsAllSubscribers: true, CreateAt: sink.TimeOf(at(3)), FetchedAt: sink.TimeOf(at(4)), Version: 204}},
		Snapshots: []sink.Snapshot{{ProjectID: 301, MessageID: 302, SnapshotAt: sink.TimeOf(at(5)), FetchedAt: sink.TimeOf(at(6)),
			ReadCount: 303, Total: 304, Percent: 30.5, Version: 305}},
	}
	b.Schedule = "batch_schedule"
	run := sink.Run{RunID: "run_id", Schedule: "schedule", Trigger: "trigger", SnapshotAt: at(7), StartedAt: at(8), FinishedAt: at(9),
		NFTTotal: 401, NFTOK: 402, NFTFailed: 403, Messages: 404, Status: "status", Error: "error"}
	if err := ch.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := ch.RecordRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	for table, row := range map[string]any{
		ProjectsTable.name: b.Projects[0], MessagesTable.name: b.Messages[0], SnapshotsTable.name: b.Snapshots[0], RunsTable.name: run,
	} {
		t.Run(table, func(t *testing.T) {
			want := rowJSON(t, row)
			if table == SnapshotsTable.name {
				want["schedule"] = `"batch_schedule"`
			}
			got := readRow(t, db, table)
			if !slices.Equal(slices.Sorted(mapKeys(got)), slices.Sorted(mapKeys(want))) {
				t.Fatalf("table columns %v, row fields %v", slices.Sorted(mapKeys(got)), slices.Sorted(mapKeys(want)))
			}
			for name, w := range want {
				if got[name] != w {
					t.Errorf("column %s holds %s, want %s", name, got[name], w)
				}
			}
		})
	}
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// rowJSON returns each field of row as its JSON text, by JSON name; a
// bool reads as the UInt8 ClickHouse stores.
func rowJSON(t *testing.T, row any) map[string]string {
	t.Helper()
	raw, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range fields {
		switch s := string(v); s {
		case "true":
			out[k] = "1"
		case "false":
			out[k] = "0"
		default:
			out[k] = s
		}
	}
	return out
}

// readRow reads the table's one row and returns each column as JSON text
// in the form rowJSON gives, times as RFC 3339 in UTC.
func readRow(t *testing.T, db *sinktest.DB, table string) map[string]string {
	t.Helper()
	rows, err := db.Conn.Query(context.Background(), "SELECT * FROM "+db.Table(table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("%s is empty", table)
	}
	types := rows.ColumnTypes()
	dest := make([]any, len(types))
	for i, ct := range types {
		dest[i] = reflect.New(ct.ScanType()).Interface()
	}
	if err := rows.Scan(dest...); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for i, ct := range types {
		v := reflect.ValueOf(dest[i]).Elem().Interface()
		if tm, ok := v.(time.Time); ok {
			v = tm.UTC().Format(time.RFC3339)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[ct.Name()] = string(b)
	}
	if rows.Next() {
		t.Fatalf("%s has more than one row", table)
	}
	return out
}

// The single-server DDL is the previous release's, column for column, with
// the columns added since at the end, and cluster mode differs only in
// where the rows live.
func TestCreateTableStatements(t *testing.T) {
	single := ddl{chconn.NewNames("d", chconn.Topology{})}
	got := single.createTable(SnapshotsTable.def())
	want := "CREATE TABLE IF NOT EXISTS `d`.`message_read_snapshots` (\n    project_id Int64,\n    message_id Int64,\n    snapshot_at DateTime,\n" +
		"    read_count UInt64,\n    total UInt64,\n    percent Float64,\n    fetched_at DateTime,\n    version UInt64,\n    schedule String\n) ENGINE = ReplacingMergeTree(version)\n" +
		"PARTITION BY toYYYYMM(snapshot_at)\nORDER BY (project_id, message_id, snapshot_at)"
	if len(got) != 1 || got[0] != want {
		t.Errorf("single server:\n%s\nwant\n%s", strings.Join(got, "\n;\n"), want)
	}
	cluster := ddl{chconn.NewNames("d", chconn.Topology{Cluster: "c"})}
	got = cluster.createTable(RunsTable.def())
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
	got = ddl{chconn.NewNames("d", chconn.Topology{Cluster: "c", ReplicaPath: "/p/{table}"})}.createTable(ProjectsTable.def())
	if want := "ENGINE = ReplicatedReplacingMergeTree('/p/{table}', '{replica}', version)"; !strings.Contains(got[0], want) {
		t.Errorf("%s\nwant %s", got[0], want)
	}
	if want := fmt.Sprintf("cityHash64(%s)", "id"); !strings.Contains(got[1], want) {
		t.Errorf("%s\nwant sharding by %s", got[1], want)
	}
}
