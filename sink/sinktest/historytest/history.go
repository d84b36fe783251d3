package historytest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
)

// History writes generated passes the way readsync writes them: each
// project fetched at a snapshot gets its own version, all of its rows
// share it, and a pass's rows go out in shared batches. Around the regular
// passes it does everything else readsync does to the snapshot table.
type History struct {
	t   *testing.T
	ch  *clickhouse.ClickHouse
	rnd *rand.Rand
	// Version is the last version NextVersion handed out: a History
	// that goes on from another's starts from it.
	Version uint64
	// Reads holds each message's read count, which only grows.
	Reads map[[2]int64]uint64
	// Deleted messages are no longer listed upstream.
	Deleted map[[2]int64]bool
}

// Schedule is the schedule whose ticks History's passes run.
const Schedule = "every-4h"

// Projects is how many projects a History's passes fetch.
const Projects = 4

// projectMessages is how many messages each project has, the last of
// which never has read data.
const projectMessages = 6

// NewHistory returns a History that writes through ch; with ch nil, its
// rows are the test's to write (Fetch).
func NewHistory(t *testing.T, ch *clickhouse.ClickHouse) *History {
	return &History{t: t, ch: ch, rnd: rand.New(rand.NewPCG(10, 10)), Version: 1 << 40,
		Reads: map[[2]int64]uint64{}, Deleted: map[[2]int64]bool{}}
}

// NextVersion returns a version newer than every one before.
func (h *History) NextVersion() uint64 { h.Version += 1 + uint64(h.rnd.IntN(1000)); return h.Version }

// Fetch returns the rows of one complete fetch of project p at snapshot
// at: its project row and the snapshots of its listed messages.
func (h *History) Fetch(p int64, at time.Time, v uint64) sink.Batch {
	ts := sink.TimeOf(at)
	b := sink.Batch{Projects: []sink.Project{{ID: p, NFT: fmt.Sprintf("p%d.eth", p), Name: fmt.Sprintf("Project %d", p),
		CreateAt: ts, Raw: "{}", FetchedAt: ts, Version: v}}}
	for m := int64(1); m <= projectMessages; m++ {
		key := [2]int64{p, m}
		if h.Deleted[key] {
			continue
		}
		b.Messages = append(b.Messages, sink.Message{ProjectID: p, ID: p*100 + m, Subject: fmt.Sprintf("m%d", m),
			CreateAt: messageCreated(p, m), FetchedAt: ts, Version: v})
		if m == projectMessages {
			continue // never has read_data: no snapshot row
		}
		h.Reads[key] += uint64(h.rnd.IntN(5))
		total := uint64(10 + m)
		if p == 4 && m == 1 {
			// Counts near the top of UInt64 must survive the rollups'
			// encoding exactly.
			total = math.MaxUint64 - uint64(h.rnd.IntN(5))
			h.Reads[key] += 1 << 63
		}
		b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: p*100 + m, SnapshotAt: ts, FetchedAt: ts,
			ReadCount: h.Reads[key], Total: total, Percent: float64(100*h.Reads[key]) / float64(total), Version: v})
	}
	return b
}

// messageCreated is the create_at of project p's message m: message 1 is
// created 17 minutes after the first pass, which lists it already (a
// clock ahead of the upstream's); the others from 30 hours to five days
// before it, so that their curves start late, some past 72 hours; and
// the message sent mid-history (Generate) 10 minutes before it is first
// listed.
func messageCreated(p, m int64) sink.Time {
	if p == 2 && m == 5 {
		return sink.TimeOf(time.Date(2026, 3, 2, 7, 50, 0, 0, time.UTC))
	}
	first := time.Date(2026, 3, 1, 0, 17, 0, 0, time.UTC)
	return sink.TimeOf(first.Add(-time.Duration(m-1) * 30 * time.Hour))
}

// Pass fetches every project at at, writing the rows in batches that
// split projects between INSERTs, as a large pass does, and records the
// tick.
func (h *History) Pass(at time.Time) {
	h.t.Helper()
	defer h.RecordTick(at, "ok")
	var all sink.Batch
	for p := int64(1); p <= Projects; p++ {
		f := h.Fetch(p, at, h.NextVersion())
		all.Projects = append(all.Projects, f.Projects...)
		all.Messages = append(all.Messages, f.Messages...)
		all.Snapshots = append(all.Snapshots, f.Snapshots...)
	}
	// The project and message rows first, as a pass writes a long list's
	// message rows before its snapshot rows, which wait on disk until the
	// list has arrived whole: a snapshot's age needs its message's
	// create_at.
	h.Write(&sink.Batch{Projects: all.Projects, Messages: all.Messages, Schedule: Schedule})
	split := 7 // not a multiple of a project's rows
	for len(all.Snapshots) > 0 {
		n := min(split, len(all.Snapshots))
		h.Write(&sink.Batch{Snapshots: all.Snapshots[:n], Schedule: Schedule})
		all.Snapshots = all.Snapshots[n:]
	}
}

// RecordTick records a tick of Schedule at at with status.
func (h *History) RecordTick(at time.Time, status string) {
	h.t.Helper()
	r := sink.Run{RunID: fmt.Sprintf("%s-%d-%d", status, at.Unix(), h.NextVersion()), Schedule: Schedule, Trigger: "cron",
		SnapshotAt: at, StartedAt: at, FinishedAt: at, Status: status}
	if err := h.ch.RecordRun(context.Background(), r); err != nil {
		h.t.Fatal(err)
	}
}

// Write writes b through the sink, failing the test if it fails.
func (h *History) Write(b *sink.Batch) {
	h.t.Helper()
	if err := h.ch.Write(context.Background(), b); err != nil {
		h.t.Fatal(err)
	}
}

// Generate writes three days of passes every four hours and, among them,
// the other ways rows reach the snapshot table. With redeliver, one spool
// entry is delivered twice.
func (h *History) Generate(redeliver bool) {
	day0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var spooled []sink.Batch
	// A message sent mid-history, listed from tick 8 on.
	h.Deleted[[2]int64{2, 5}] = true
	for i := 0; i < 18; i++ {
		at := day0.Add(time.Duration(i) * 4 * time.Hour)
		switch i {
		case 4:
			// A message not listed for a while, from day 0 to day 2.
			h.Deleted[[2]int64{3, 3}] = true
		case 8:
			delete(h.Deleted, [2]int64{2, 5})
		case 13:
			// A tick missed: readsync was down.
			h.RecordTick(at, "missed")
			continue
		case 15:
			delete(h.Deleted, [2]int64{3, 3})
			// A message left out of one list and back in the next, on
			// the same day.
			h.Deleted[[2]int64{4, 3}] = true
		case 16:
			delete(h.Deleted, [2]int64{4, 3})
		case 3:
			// The same tick run twice: the second run's rows are newer
			// versions of the same keys.
			h.Pass(at)
			h.Pass(at)
			continue
		case 5:
			// A pass whose rows were spooled while ClickHouse was down,
			// replayed after later passes were written.
			for p := int64(1); p <= Projects; p++ {
				spooled = append(spooled, h.Fetch(p, at, h.NextVersion()))
			}
			h.RecordTick(at, "ok")
			continue
		case 7:
			// A retried list: the failed attempt streamed part of the
			// project's rows before breaking off; the retry writes all of
			// them with a newer version.
			f := h.Fetch(2, at, h.NextVersion())
			h.Write(&sink.Batch{Snapshots: f.Snapshots[:2]})
			h.Pass(at)
			continue
		case 9:
			// A message deleted upstream: it keeps its earlier
			// snapshots of the day but is absent from later ones.
			h.Deleted[[2]int64{3, 2}] = true
		case 11:
			for _, b := range spooled {
				h.Write(&b)
			}
			if redeliver {
				// The same spool entry delivered again, as after a
				// crash between the INSERT and the entry's removal.
				h.Write(&spooled[0])
			}
		}
		h.Pass(at)
	}
	// A backfill with --snapshot-at in the past, fetched now: a newer
	// version at an older snapshot, which must not become the latest.
	for p := int64(1); p <= 2; p++ {
		b := h.Fetch(p, day0.Add(30*time.Hour), h.NextVersion())
		h.Write(&b)
	}
	// A project fetched once only, at the very start, out of order.
	b := h.Fetch(4, day0.Add(-time.Hour), h.NextVersion())
	h.Write(&b)
}

// InsertDirect writes a batch's rows with INSERTs of their own, as
// 0.1.0 did, without migrating.
func InsertDirect(t *testing.T, db *sinktest.DB, b sink.Batch) {
	t.Helper()
	insert := func(table, columns string, n int, row func(i int) []any) {
		batch, err := db.Conn.PrepareBatch(context.Background(), fmt.Sprintf("INSERT INTO %s (%s)", db.Table(table), columns))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := batch.Append(row(i)...); err != nil {
				t.Fatal(err)
			}
		}
		if err := batch.Send(); err != nil {
			t.Fatal(err)
		}
	}
	insert("projects", "id, nft, name, raw, version", len(b.Projects), func(i int) []any {
		p := b.Projects[i]
		return []any{p.ID, p.NFT, p.Name, p.Raw, p.Version}
	})
	insert("messages", "project_id, id, subject, create_at, version", len(b.Messages), func(i int) []any {
		m := b.Messages[i]
		return []any{m.ProjectID, m.ID, m.Subject, m.CreateAt.Time(), m.Version}
	})
	insert("message_read_snapshots", "project_id, message_id, snapshot_at, read_count, total, percent, version", len(b.Snapshots), func(i int) []any {
		s := b.Snapshots[i]
		return []any{s.ProjectID, s.MessageID, s.SnapshotAt.Time(), s.ReadCount, s.Total, s.Percent, s.Version}
	})
}

// WriteUnrefreshed writes three snapshots of each of the first projects
// projects, an hour apart from at, straight into the tables, as a killed
// process or a hand INSERT leaves them: changed, never refreshed. It
// returns the distinct project snapshots written, and waits until they
// are older than the settle delay of OpenSettled.
func WriteUnrefreshed(t *testing.T, db *sinktest.DB, h *History, projects int64, at time.Time) int {
	t.Helper()
	var all sink.Batch
	n := 0
	for p := int64(1); p <= projects; p++ {
		for i := range 3 {
			b := h.Fetch(p, at.Add(time.Duration(i)*time.Hour), h.NextVersion())
			all.Projects = append(all.Projects, b.Projects...)
			all.Messages = append(all.Messages, b.Messages...)
			all.Snapshots = append(all.Snapshots, b.Snapshots...)
			n++
		}
	}
	InsertDirect(t, db, all)
	sinktest.AwaitSettled(t, db.Conn, time.Second) // the settle delay of OpenSettled
	return n
}
