package clickhouse_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

func TestClickHouseRoundTrip(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	ts := sink.TimeOf(at)
	odd := "quote\" apostrophe' back\\slash\nnewline\x00nul café-☕ 𝄞"
	b := &sink.Batch{
		Projects: []sink.Project{{ID: 9007199254740993, NFT: "café-☕.eth", Name: odd, Type: -3, CreateAt: ts,
			Raw: `{"id":9007199254740993,"extra":[1,2]}`, FetchedAt: ts, Version: 1}},
		Messages: []sink.Message{{ProjectID: 9007199254740993, ID: 1<<62 + 7, Sender: "café-☕.eth", Receivers: []string{"a", odd},
			Subject: odd, IsAllSubscribers: true, CreateAt: ts, FetchedAt: ts, Version: 1}},
		Snapshots: []sink.Snapshot{{ProjectID: 9007199254740993, MessageID: 1<<62 + 7, SnapshotAt: ts,
			ReadCount: 1<<63 + 1, Total: 1<<63 + 2, Percent: 99.99, FetchedAt: ts, Version: 1}},
	}
	if err := ch.Write(ctx, b); err != nil {
		t.Fatal(err)
	}

	var (
		name, raw string
		id        int64
		typ       int64
	)
	if err := db.Conn.QueryRow(ctx, "SELECT id, name, type, raw FROM "+db.Table("projects")+" FINAL").Scan(&id, &name, &typ, &raw); err != nil {
		t.Fatal(err)
	}
	if id != 9007199254740993 || name != odd || typ != -3 || raw != `{"id":9007199254740993,"extra":[1,2]}` {
		t.Errorf("project read back as id=%d name=%q type=%d raw=%q", id, name, typ, raw)
	}

	var (
		subject   string
		receivers []string
		all       uint8
		created   time.Time
	)
	if err := db.Conn.QueryRow(ctx, "SELECT subject, receivers, is_all_subscribers, create_at FROM "+db.Table("messages")+" FINAL").
		Scan(&subject, &receivers, &all, &created); err != nil {
		t.Fatal(err)
	}
	if subject != odd || !slices.Equal(receivers, []string{"a", odd}) || all != 1 || !created.Equal(at) {
		t.Errorf("message read back as subject=%q receivers=%q all=%d create_at=%v", subject, receivers, all, created)
	}

	var readCount, total uint64
	var percent float64
	if err := db.Conn.QueryRow(ctx, "SELECT read_count, total, percent FROM "+db.Table("message_read_snapshots")+" FINAL").
		Scan(&readCount, &total, &percent); err != nil {
		t.Fatal(err)
	}
	if readCount != 1<<63+1 || total != 1<<63+2 || percent != 99.99 {
		t.Errorf("snapshot read back as %d/%d %v%%", readCount, total, percent)
	}
}

// The higher version of a key wins under FINAL, whatever the order the
// writes arrive in (a spooled batch can land after a newer one).
func TestClickHouseUpsertByVersion(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	ts := sink.TimeOf(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, v := range []uint64{101, 100} {
		b := &sink.Batch{Snapshots: []sink.Snapshot{{ProjectID: 1, MessageID: 2, SnapshotAt: ts, ReadCount: v - 81, Total: 50, FetchedAt: ts, Version: v}}}
		if err := ch.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if n := db.Count(t, "message_read_snapshots"); n != 1 {
		t.Fatalf("FINAL shows %d rows, want 1", n)
	}
	var readCount uint64
	if err := db.Conn.QueryRow(ctx, "SELECT read_count FROM "+db.Table("message_read_snapshots")+" FINAL").Scan(&readCount); err != nil {
		t.Fatal(err)
	}
	if readCount != 20 {
		t.Errorf("read_count = %d, want version 101's 20", readCount)
	}
}

// A batch larger than the block the driver sends at a time arrives whole,
// in one part: no row lost or repeated where one block ends and the next
// begins. The row counts straddle block boundaries: one past two blocks,
// and exactly two.
func TestClickHouseWriteSpansBlocks(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	ts := sink.TimeOf(time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC))
	const messages, snapshots = 2*chconn.InsertBlockRows + 1, 2 * chconn.InsertBlockRows
	b := &sink.Batch{}
	for i := range messages {
		b.Messages = append(b.Messages, sink.Message{ProjectID: 1, ID: int64(i), Subject: fmt.Sprintf("subject %d", i),
			CreateAt: ts, FetchedAt: ts, Version: 1})
	}
	for i := range snapshots {
		b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: 1, MessageID: int64(i), SnapshotAt: ts,
			ReadCount: uint64(i), Total: uint64(snapshots), FetchedAt: ts, Version: 1})
	}
	if err := ch.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table, query string
		want         [3]uint64
	}{
		{"messages", "SELECT count(), uniqExact(id), sum(toUInt64(length(subject)) + toUInt64(id))", [3]uint64{messages, messages, 0}},
		{"message_read_snapshots", "SELECT count(), uniqExact(message_id), sum(read_count)", [3]uint64{snapshots, snapshots, snapshots * (snapshots - 1) / 2}},
	} {
		if c.table == "messages" {
			for i := range messages {
				c.want[2] += uint64(len(fmt.Sprintf("subject %d", i)) + i)
			}
		}
		var got [3]uint64
		if err := db.Conn.QueryRow(ctx, c.query+" FROM "+db.Table(c.table)).Scan(&got[0], &got[1], &got[2]); err != nil {
			t.Fatalf("%s: %v", c.table, err)
		}
		if got != c.want {
			t.Errorf("%s: count, distinct keys, checksum = %v, want %v", c.table, got, c.want)
		}
		// The server squashes the INSERT's blocks: one part, as if the
		// batch had gone in one block.
		var parts uint64
		if err := db.Conn.QueryRow(ctx, "SELECT count() FROM system.parts WHERE active AND database = ? AND table = ?",
			db.Name, c.table).Scan(&parts); err != nil {
			t.Fatalf("%s parts: %v", c.table, err)
		}
		if parts != 1 {
			t.Errorf("%s: %d parts from one INSERT, want 1", c.table, parts)
		}
	}
}

func TestClickHouseRecordRun(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run := sink.Run{RunID: "r1", Schedule: "hourly", Trigger: "cron", SnapshotAt: at, StartedAt: at, FinishedAt: at.Add(time.Second),
		NFTTotal: 3, NFTOK: 2, NFTFailed: 1, Messages: 7, Status: "partial", Error: "1 of 3 names failed"}
	if err := ch.RecordRun(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	var status, msg string
	var ok, failed uint64
	if err := db.Conn.QueryRow(context.Background(), "SELECT status, error, nft_ok, nft_failed FROM "+db.Table("sync_runs")+" WHERE run_id = 'r1'").
		Scan(&status, &msg, &ok, &failed); err != nil {
		t.Fatal(err)
	}
	if status != "partial" || msg != run.Error || ok != 2 || failed != 1 {
		t.Errorf("run read back as %s %q %d/%d", status, msg, ok, failed)
	}
}

func TestParseDSN(t *testing.T) {
	tests := []struct {
		dsn     string
		db      string
		wantErr string
	}{
		{"clickhouse://u:p@127.0.0.1:9000/analytics", "analytics", ""},
		{"clickhouse://127.0.0.1:9000", "default", ""},
		{"tcp://127.0.0.1:9000/x?dial_timeout=5s", "x", ""},
		{"http://u:hunter2@127.0.0.1:8123/x", "", "native protocol"},
		{"127.0.0.1:9000", "", "not a URL"},
		{"clickhouse://u:hunter2@127.0.0.1:9000/x?dial_timeout=soon", "", "dial timeout"},
		{"clickhouse://u:hun%zzter2@host:9000/x", "", "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.dsn, func(t *testing.T) {
			d, err := chconn.ParseDSN(tt.dsn)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				// Opening does not connect: it shows the database the DSN names.
				ch, err := clickhouse.OpenClickHouse(context.Background(), d)
				if err != nil {
					t.Fatal(err)
				}
				defer ch.Close()
				if ch.Database() != tt.db {
					t.Errorf("database %q, want %q", ch.Database(), tt.db)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			for _, secret := range []string{"hunter2", "hun%zzter2"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error leaks the password: %v", err)
				}
			}
		})
	}
}
