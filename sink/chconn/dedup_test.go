package chconn_test

import (
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// Every column of every table has an encoding of its own in the token, so
// that two INSERTs that differ in any value differ in their tokens.
func TestInsertTokenEncodesEveryColumn(t *testing.T) {
	checkColumns(t, schema.ProjectsTable, &sink.Project{})
	checkColumns(t, schema.MessagesTable, &sink.Message{})
	checkColumns(t, schema.SnapshotsTable, &sink.Snapshot{})
	checkColumns(t, schema.RunsTable, &sink.Run{})
	var zero uint64
	checkColumns(t, schema.SpeedTable, &schema.SpeedRow{})
	checkColumns(t, schema.SpeedTable, &schema.SpeedRow{ReadsAt: [5]*uint64{&zero}})
	// NULL and 0 are two values: their rows have two tokens.
	if chconn.InsertToken(schema.SpeedTable, nil, []schema.SpeedRow{{}}) == chconn.InsertToken(schema.SpeedTable, nil, []schema.SpeedRow{{ReadsAt: [5]*uint64{&zero}}}) {
		t.Error("a NULL and a 0 give one token")
	}
}

// checkColumns checks that the token has an encoding of its own for the
// value of every column of table, the batch's included, in a zero row.
func checkColumns[R any](t *testing.T, table chconn.Table[R], row *R) {
	t.Helper()
	columns := strings.Split(table.ColumnList(), ", ")
	for i, v := range table.BatchValues(table.RowValues(nil, row), &sink.Batch{}) {
		if !chconn.EncodesValue(v) {
			t.Errorf("%s.%s: no encoding for %T", table.Name(), columns[i], v)
		}
	}
}

// The token is the same for the same rows, and differs when any value, or
// the order of the rows, or the table, differs.
func TestInsertToken(t *testing.T) {
	at := sink.TimeOf(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	rows := func() []sink.Snapshot {
		return []sink.Snapshot{
			{ProjectID: 1, MessageID: 1, SnapshotAt: at, ReadCount: 5, Total: 10, Percent: 50, FetchedAt: at, Version: 1},
			{ProjectID: 1, MessageID: 2, SnapshotAt: at, ReadCount: 6, Total: 10, Percent: 60, FetchedAt: at, Version: 1},
		}
	}
	b := &sink.Batch{Schedule: "hourly"}
	base := chconn.InsertToken(schema.SnapshotsTable, b, rows())
	if again := chconn.InsertToken(schema.SnapshotsTable, b, rows()); again != base {
		t.Errorf("the same rows give %s, then %s", base, again)
	}
	for name, change := range map[string]func([]sink.Snapshot){
		"read_count": func(r []sink.Snapshot) { r[1].ReadCount++ },
		"percent":    func(r []sink.Snapshot) { r[0].Percent += 1e-9 },
		"version":    func(r []sink.Snapshot) { r[0].Version++ },
		"order":      func(r []sink.Snapshot) { r[0], r[1] = r[1], r[0] },
	} {
		r := rows()
		change(r)
		if chconn.InsertToken(schema.SnapshotsTable, b, r) == base {
			t.Errorf("a change of %s keeps the token", name)
		}
	}
	if chconn.InsertToken(schema.SnapshotsTable, &sink.Batch{Schedule: "daily"}, rows()) == base {
		t.Error("the same rows written by another schedule's pass keep the token")
	}
	runs := []sink.Run{{RunID: "a"}}
	if chconn.InsertToken(schema.RunsTable, nil, runs) == chconn.InsertToken(schema.RunsTable, nil, []sink.Run{{RunID: "b"}}) {
		t.Error("run records that differ share a token")
	}
	// Pinned: a spool entry written by this release is replayed by a
	// later one, whose token must be that of the first attempt. (Release
	// 0.4.0 added the schedule to the snapshots' digest: an entry of an
	// earlier release that had reached the server before it was replayed
	// adds its rows to message_read_snapshots again, which every view reads
	// deduplicated, by key and version.)
	if want := "readsync-v1-ac2c9fe4747be040de807783ca020da127b4dc677374ccc25123b2c3f1398fe6"; base != want {
		t.Errorf("token %s, want %s: the digest changed for the same rows", base, want)
	}
}

// BenchmarkInsertToken measures the token of one full batch of snapshot
// rows (READSYNC_BATCH_ROWS' default), what each INSERT adds on a server
// that honours tokens.
func BenchmarkInsertToken(b *testing.B) {
	at := sink.TimeOf(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	rows := make([]sink.Snapshot, 50000)
	for i := range rows {
		rows[i] = sink.Snapshot{ProjectID: int64(i / 20), MessageID: int64(i), SnapshotAt: at, ReadCount: uint64(i), Total: 1000, Percent: 12.5, FetchedAt: at, Version: uint64(i)}
	}
	b.ReportAllocs()
	for b.Loop() {
		chconn.InsertToken(schema.SnapshotsTable, &sink.Batch{Schedule: "hourly"}, rows)
	}
}
