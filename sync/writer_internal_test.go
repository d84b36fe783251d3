package sync

import (
	"context"
	"log/slog"
	gosync "sync"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
)

// A batch handed over for its age never splits the rows a name commits,
// however many pieces they come back from disk in: a flusher that tries
// all the while takes the batch only between two names.
func TestBatchTimeoutWaitsForACommit(t *testing.T) {
	w := newWriter(context.Background(), &store{log: slog.New(slog.DiscardHandler)}, 1<<30, 1<<30, time.Nanosecond, "", slog.New(slog.DiscardHandler))
	st := &stage{w: w, spill: 1 << 30, snaps: spillFile{dir: t.TempDir()}}
	t.Cleanup(func() { st.snaps.close() })
	for round := range 20 {
		st.begin("long.eth")
		for piece := range 50 {
			if err := st.snaps.put([]sink.Snapshot{{ProjectID: int64(round), MessageID: int64(piece)}}); err != nil {
				t.Fatal(err)
			}
		}
		st.rows.Projects = append(st.rows.Projects, sink.Project{ID: int64(round)})
		var taken []fullBatch
		var mu gosync.Mutex
		stop := make(chan struct{})
		var wg gosync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if fb, ok := w.takeDue(); ok {
					mu.Lock()
					taken = append(taken, fb)
					mu.Unlock()
				}
			}
		})
		if err := st.commit(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		if fb, ok := w.takeDue(); ok {
			taken = append(taken, fb)
		}
		for _, fb := range taken {
			if n := len(fb.b.Snapshots); n != 0 && n != 50 {
				t.Fatalf("round %d: a batch took %d of a name's 50 snapshot rows", round, n)
			}
		}
	}
}

// A batch is handed over at its row limit, or once its rows hold the byte
// limit, whichever comes first: rows of long texts make batches of fewer
// rows, rows of numbers reach the row limit.
func TestBatchHandedOverAtRowsOrBytes(t *testing.T) {
	long := sink.Project{Raw: string(make([]byte, 1000))}
	for _, tt := range []struct {
		name string
		rows sink.Batch
		want int // rows in the first batch handed over
	}{
		{"projects with a long raw record reach the bytes first", sink.Batch{Projects: []sink.Project{long}}, 10},
		{"snapshots reach the rows first", sink.Batch{Snapshots: []sink.Snapshot{{}}}, 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			byteLimit := 10 * (1000 + tt.rows.Bytes() - len(long.Raw)*len(tt.rows.Projects))
			w := newWriter(context.Background(), &store{log: slog.New(slog.DiscardHandler)}, 100, byteLimit, time.Hour, "", slog.New(slog.DiscardHandler))
			sizes := make(chan int, 1000)
			stop := make(chan struct{})
			var flusher gosync.WaitGroup
			flusher.Go(func() {
				for {
					select {
					case fb := <-w.full:
						sizes <- fb.b.Len()
					case <-stop:
						return
					}
				}
			})
			for range 3 * tt.want {
				w.add("n.eth", &tt.rows, 0)
			}
			close(stop)
			flusher.Wait()
			if len(sizes) == 0 {
				t.Fatal("no batch handed over")
			}
			if n := <-sizes; n != tt.want {
				t.Errorf("the first batch handed over held %d rows, want %d", n, tt.want)
			}
		})
	}
}
