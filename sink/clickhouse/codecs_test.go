package clickhouse_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// Migration 13 gives the snapshot table's columns their codecs where the
// server takes codecs, and is neither applied nor pending where it does
// not (18.16). Applied to a table that holds rows, it runs no mutation and
// leaves every part as it was; the types stay, so a percent such as 12.34
// is stored exactly however it is inserted, and the rows written before
// and after read back the same.
func TestCompactStorage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := sinktest.New(t)
	historytest.MigrateFirst(t, db.DSN, 12)
	at := sink.TimeOf(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	historytest.InsertDirect(t, db, sink.Batch{Snapshots: []sink.Snapshot{
		{ProjectID: 1, MessageID: 1, SnapshotAt: at, ReadCount: 1234, Total: 10000, Percent: 12.34, Version: 1},
	}})
	parts := func() []string {
		return sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT name FROM system.parts WHERE active AND database = '%s' AND table = 'message_read_snapshots' ORDER BY name", db.Name))
	}
	before := parts()

	ch := historytest.OpenSink(t, db.DSN)
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	server, err := ch.Server(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if server.Codecs() != (server.Version.Major >= 20) {
		t.Fatalf("ClickHouse %s: Codecs() is %v; every release from 20.1 takes codecs, 18.16 none", server.Release, server.Codecs())
	}
	v, err := ch.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Current() || slices.Contains(v.Pending, `13 "compact storage"`) {
		t.Errorf("schema after Migrate: %+v, want current", v)
	}
	if !server.Codecs() {
		t.Logf("ClickHouse %s takes no codecs: migration 13 waits for its upgrade", server.Release)
	} else {
		codecs := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT concat(name, ' ', type, ' ', compression_codec) FROM system.columns WHERE database = '%s' AND table = 'message_read_snapshots' ORDER BY position", db.Name))
		want := []string{"project_id Int64 CODEC(ZSTD(3))", "message_id Int64 CODEC(ZSTD(9))", "snapshot_at DateTime CODEC(Delta(4), ZSTD(3))",
			"read_count UInt64 CODEC(ZSTD(9))", "total UInt64 CODEC(ZSTD(9))", "percent Float64 CODEC(ZSTD(9))",
			"fetched_at DateTime CODEC(Delta(4), ZSTD(3))", "version UInt64 CODEC(Delta(8), ZSTD(3))", "schedule String CODEC(ZSTD(3))"}
		if !slices.Equal(codecs, want) {
			t.Errorf("the snapshot table's columns:\n%s\nwant\n%s", strings.Join(codecs, "\n"), strings.Join(want, "\n"))
		}
	}
	if got := parts(); !slices.Equal(got, before) {
		t.Errorf("the parts written before the migration changed: %v, were %v", got, before)
	}
	if got := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT toString(count()) FROM system.mutations WHERE database = '%s'", db.Name)); got[0] != "0" {
		t.Errorf("the migration ran %s mutations", got[0])
	}

	// Hand imports, a literal and a SELECT's Float64 (a value that a
	// Decimal would truncate to 0.28), and a write of readsync's own.
	table := db.Table("message_read_snapshots")
	for _, q := range []string{
		"INSERT INTO " + table + " (project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version, schedule) SELECT 1, 2, toDateTime('2026-03-02 10:00:00'), 1234, 10000, 12.34, toDateTime('2026-03-02 10:00:02'), 2, ''",
		"INSERT INTO " + table + " (project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version, schedule) SELECT 1, 3, toDateTime('2026-03-02 10:00:00'), 29, 100, toFloat64(29) / 100, toDateTime('2026-03-02 10:00:02'), 3, ''",
	} {
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Write(ctx, &sink.Batch{Snapshots: []sink.Snapshot{{ProjectID: 1, MessageID: 4, SnapshotAt: at, FetchedAt: at, ReadCount: 1234, Total: 10000, Percent: 12.34, Version: 4}}}); err != nil {
		t.Fatal(err)
	}
	got := sinktest.Lines(t, db.Conn, "SELECT concat(toString(message_id), ' ', toString(percent), ' ', toString(percent = 12.34 OR percent = 0.29)) FROM "+table+" ORDER BY message_id")
	want := []string{"1 12.34 1", "2 12.34 1", "3 0.29 1", "4 12.34 1"}
	if !slices.Equal(got, want) {
		t.Errorf("percent read back: %v, want %v", got, want)
	}
}
