package historytest

import (
	"context"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
)

// WriteViewFixture writes two projects with known snapshots over two UTC
// days. Several keys are written twice with different versions, the newer
// version first, so that a view that ignored versions or trusted arrival
// order would show the wrong values.
func WriteViewFixture(t *testing.T, ch *clickhouse.ClickHouse) {
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
