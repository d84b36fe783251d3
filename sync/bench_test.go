package sync

import (
	"fmt"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/permessage"
	"github.com/readsync/readsync/sink"
)

// BenchmarkRowBuilder measures turning decoded messages into their messages
// and message_read_snapshots rows, per message. The output slices are
// reused across loops so that the figure is the builder's own work (time
// parsing, percent parsing, the rules); how a pass gathers rows into
// batches is measured by make bench.
func BenchmarkRowBuilder(b *testing.B) {
	for _, n := range []int{20, 10_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			p := apitest.Generate(1, n, 1)[0]
			msgs := decodedMessages(p.Messages)
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			rows := make([]sink.Message, 0, n)
			snaps := make([]sink.Snapshot, 0, n)
			b.ReportAllocs()
			permessage.Loop(b, n, func() {
				rb := newRowBuilder(time.UTC, at, at, 1)
				rows, snaps = rows[:0], snaps[:0]
				for _, m := range msgs {
					rows = append(rows, rb.message(p.ID, m))
					if s, ok := rb.snapshot(p.ID, m); ok {
						snaps = append(snaps, s)
					}
				}
				if len(rb.warnings) > 0 {
					b.Fatalf("generated messages raised warnings %v; the benchmark should measure the common path", rb.warnings)
				}
			})
			if len(rows) != n || len(snaps) != n {
				b.Fatalf("built %d message and %d snapshot rows from %d messages", len(rows), len(snaps), n)
			}
		})
	}
}

// decodedMessages converts the fake's messages into what the API client
// hands a pass, as if they had been served and decoded.
func decodedMessages(ms []apitest.Message) []apiclient.Message {
	out := make([]apiclient.Message, len(ms))
	for i, m := range ms {
		out[i] = apiclient.Message{
			ID:               m.ID,
			ReadData:         &apiclient.ReadData{Percent: apiclient.Percent(m.Percent), ReadCount: m.ReadCount, Total: m.Total},
			CreateAt:         m.CreateAt,
			Sender:           m.Sender,
			RecvGroup:        m.RecvGroup,
			Receivers:        m.Receivers,
			Subject:          m.Subject,
			Type:             m.Type,
			IsAllSubscribers: m.IsAllSubscribers,
		}
	}
	return out
}
