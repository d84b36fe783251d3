package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// Any batch shape writes with the server's default settings, its derived
// rows included: no statement names the batch's projects, days or
// messages in its text, which the server caps (max_query_size). Every
// view then has every project, and equals its brute force.
func TestBatchShapes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name               string
		projects, messages int
	}{
		{"50 000 projects of one message", 50_000, 1},
		{"one project of 300 000 messages", 1, 300_000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch, db := historytest.OpenTestSink(t)
			ctx := context.Background()
			at := sink.TimeOf(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			// Created 72 hours before the first snapshot: each curve has
			// two ages, 72 and (a day later) 96, which keeps what --verify
			// compares for 300 000 messages small.
			created := sink.TimeOf(at.Time().Add(-72 * time.Hour))
			var b sink.Batch
			for p := range int64(tt.projects) {
				b.Projects = append(b.Projects, sink.Project{ID: p + 1, NFT: fmt.Sprintf("p%d.eth", p+1), CreateAt: at, FetchedAt: at, Version: 1})
				for m := range int64(tt.messages) {
					b.Messages = append(b.Messages, sink.Message{ProjectID: p + 1, ID: m + 1, CreateAt: created, FetchedAt: at, Version: 1})
					b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p + 1, MessageID: m + 1, SnapshotAt: at, FetchedAt: at,
						ReadCount: uint64(m % 7), Total: 10, Percent: float64(m%7) * 10, Version: 1})
				}
			}
			if err := ch.Write(ctx, &b); err != nil {
				t.Fatal(err)
			}
			// A second snapshot of every project, a day later: the gains
			// look each message's previous row up.
			next := sink.TimeOf(at.Time().Add(24 * time.Hour))
			for i := range b.Snapshots {
				b.Snapshots[i].SnapshotAt, b.Snapshots[i].Version, b.Snapshots[i].ReadCount = next, 2, b.Snapshots[i].ReadCount+1
			}
			b.Projects, b.Messages = nil, nil
			if err := ch.Write(ctx, &b); err != nil {
				t.Fatal(err)
			}
			rep := historytest.AssertVerified(t, ch, time.Time{})
			for _, v := range rep.Views {
				want := 2 * tt.projects
				switch v.View {
				case "message_read_latest":
					want = tt.projects * tt.messages
				case "schedule_coverage", "name_health":
					want = 0
				case "message_read_by_age":
					want = 2 * tt.projects * tt.messages
				case "message_read_speed":
					want = tt.projects * tt.messages
				}
				if v.Rows != want {
					t.Errorf("%s: %d rows, want %d", v.View, v.Rows, want)
				}
			}
			var gained uint64
			if err := db.Conn.QueryRow(ctx, "SELECT toUInt64(sum(reads_gained)) FROM "+db.Table("project_read_gains")+" WHERE snapshot_at = ?", next.Time()).Scan(&gained); err != nil {
				t.Fatal(err)
			}
			if want := uint64(tt.projects * tt.messages); gained != want {
				t.Errorf("reads gained at the second snapshot: %d, want %d, one a message", gained, want)
			}
		})
	}
}
