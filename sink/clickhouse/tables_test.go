package clickhouse_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// A row with a different value in every column comes back from ClickHouse
// with each value under the column its JSON field names. A description
// that reads the wrong field for a column (two String columns swapped, say)
// fails here, since the expectation comes from the JSON tags, not from the
// description.
func TestTablesRoundTripByColumnName(t *testing.T) {
	db := sinktest.New(t)
	ch := historytest.OpenSink(t, db.DSN)
	ctx := context.Background()

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
		schema.ProjectsTable.Name(): b.Projects[0], schema.MessagesTable.Name(): b.Messages[0], schema.SnapshotsTable.Name(): b.Snapshots[0], schema.RunsTable.Name(): run,
	} {
		t.Run(table, func(t *testing.T) {
			want := rowJSON(t, row)
			if table == schema.SnapshotsTable.Name() {
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
