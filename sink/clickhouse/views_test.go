package clickhouse_test

import (
	"context"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
)

// writeViewFixture writes two projects with known snapshots over two UTC
// days. Several keys are written twice with different versions, the newer
// version first, so that a view that ignored versions or trusted arrival
// order would show the wrong values.
func writeViewFixture(t *testing.T, ch *clickhouse.ClickHouse) {
	t.Helper()
	at := func(s string) time.Time {
		v, err := time.Parse(time.DateTime, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	fetched := sink.TimeOf(at("2026-03-02 13:00:00"))
	project := func(id int64, nft, name string, v uint64) sink.Project {
		return sink.Project{ID: id, NFT: nft, Name: name, CreateAt: fetched, Raw: "{}", FetchedAt: fetched, Version: v}
	}
	message := func(pid, id int64, subject string, v uint64) sink.Message {
		return sink.Message{ProjectID: pid, ID: id, Subject: subject, CreateAt: fetched, FetchedAt: fetched, Version: v}
	}
	snap := func(pid, mid int64, when string, reads, total uint64, pct float64, v uint64) sink.Snapshot {
		return sink.Snapshot{ProjectID: pid, MessageID: mid, SnapshotAt: sink.TimeOf(at(when)), ReadCount: reads, Total: total,
			Percent: pct, FetchedAt: fetched, Version: v}
	}
	batches := []*sink.Batch{
		{
			Projects: []sink.Project{project(1, "alpha.eth", "Alpha renamed", 2), project(2, "beta.eth", "Beta", 1)},
			Messages: []sink.Message{
				message(1, 10, "first (edited)", 2),
				message(1, 11, "second", 1),
				message(2, 20, "nobody reached", 1),
				message(2, 21, "no read data yet", 1), // has no snapshot: absent from both views
			},
			Snapshots: []sink.Snapshot{
				snap(1, 10, "2026-03-01 08:00:00", 2, 10, 20, 1),
				snap(1, 10, "2026-03-01 20:00:00", 5, 10, 50, 2),
				snap(1, 10, "2026-03-02 00:30:00", 6, 10, 60, 1),
				snap(1, 11, "2026-03-01 23:59:59", 1, 4, 25, 1),
				snap(2, 20, "2026-03-01 12:00:00", 0, 0, 0, 1),
				snap(2, 20, "2026-03-02 12:00:00", 0, 0, 0, 1),
			},
		},
		// Older versions of keys above, arriving later: they must lose.
		{
			Projects:  []sink.Project{project(1, "alpha.eth", "Alpha", 1)},
			Messages:  []sink.Message{message(1, 10, "first", 1)},
			Snapshots: []sink.Snapshot{snap(1, 10, "2026-03-01 20:00:00", 4, 10, 40, 1)},
		},
	}
	for _, b := range batches {
		if err := ch.Write(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
}

func TestViewMessageReadLatest(t *testing.T) {
	ch, db := openTestSink(t)
	writeViewFixture(t, ch)

	type row struct {
		ProjectID   int64
		NFT         string
		ProjectName string
		MessageID   int64
		Subject     string
		SnapshotAt  time.Time
		ReadCount   uint64
		Total       uint64
		Percent     float64
	}
	want := []row{
		{1, "alpha.eth", "Alpha renamed", 10, "first (edited)", time.Date(2026, 3, 2, 0, 30, 0, 0, time.UTC), 6, 10, 60},
		{1, "alpha.eth", "Alpha renamed", 11, "second", time.Date(2026, 3, 1, 23, 59, 59, 0, time.UTC), 1, 4, 25},
		{2, "beta.eth", "Beta", 20, "nobody reached", time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC), 0, 0, 0},
	}

	rows, err := db.Conn.Query(context.Background(), `SELECT project_id, nft, project_name, message_id, subject,
		snapshot_at, read_count, total, percent FROM `+db.Table("message_read_latest")+` ORDER BY project_id, message_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.ProjectID, &r.NFT, &r.ProjectName, &r.MessageID, &r.Subject, &r.SnapshotAt,
			&r.ReadCount, &r.Total, &r.Percent); err != nil {
			t.Fatal(err)
		}
		r.SnapshotAt = r.SnapshotAt.UTC()
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	compareViewRows(t, "message_read_latest", got, want)
}

func TestViewProjectReadDaily(t *testing.T) {
	ch, db := openTestSink(t)
	writeViewFixture(t, ch)

	type row struct {
		Day         time.Time
		ProjectID   int64
		NFT         string
		ProjectName string
		Messages    uint64
		Reads       uint64
		Total       uint64
		ReadRate    float64
	}
	mar1 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	mar2 := mar1.AddDate(0, 0, 1)
	want := []row{
		// Message 10's last snapshot of March 1 is 20:00 (5 of 10, the
		// newer version), message 11's is 23:59:59 (1 of 4).
		{mar1, 1, "alpha.eth", "Alpha renamed", 2, 6, 14, 6.0 / 14},
		// 00:30 UTC belongs to March 2.
		{mar2, 1, "alpha.eth", "Alpha renamed", 1, 6, 10, 0.6},
		// A total of 0 gives a read rate of 0, not NaN.
		{mar1, 2, "beta.eth", "Beta", 1, 0, 0, 0},
		{mar2, 2, "beta.eth", "Beta", 1, 0, 0, 0},
	}

	rows, err := db.Conn.Query(context.Background(), `SELECT day, project_id, nft, project_name, messages, reads, total, read_rate
		FROM `+db.Table("project_read_daily")+` ORDER BY project_id, day`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.Day, &r.ProjectID, &r.NFT, &r.ProjectName, &r.Messages, &r.Reads, &r.Total, &r.ReadRate); err != nil {
			t.Fatal(err)
		}
		// A Date has no time zone; the driver hands it back at midnight
		// in some location, so compare the calendar day only.
		y, m, d := r.Day.Date()
		r.Day = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	compareViewRows(t, "project_read_daily", got, want)
}

// compareViewRows fails the test unless a view's rows are want, in order.
func compareViewRows[R comparable](t *testing.T, view string, got, want []R) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s has %d rows, want %d:\n got %+v\nwant %+v", view, len(got), len(want), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}
