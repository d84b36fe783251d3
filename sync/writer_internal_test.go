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
	w := newWriter(context.Background(), &store{log: slog.New(slog.DiscardHandler)}, 1<<30, time.Nanosecond, "", slog.New(slog.DiscardHandler))
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
