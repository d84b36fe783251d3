package derived_test

import (
	"context"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/sinktest/historytest"
)

func TestViewMessageReadLatest(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	historytest.WriteViewFixture(t, ch)

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
	ch, db := historytest.OpenTestSink(t)
	historytest.WriteViewFixture(t, ch)

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
