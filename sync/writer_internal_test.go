package sync

import (
	"context"
	"log/slog"
	"slices"
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

// batchSizes is a sink that records the rows of each batch it is given;
// wait, when set, is called with each write's index before it returns.
type batchSizes struct {
	mu    gosync.Mutex
	sizes []int
	wait  func(write int)
}

func (s *batchSizes) Write(_ context.Context, b *sink.Batch) error {
	s.mu.Lock()
	s.sizes = append(s.sizes, b.Len())
	n := len(s.sizes)
	s.mu.Unlock()
	if s.wait != nil {
		s.wait(n - 1)
	}
	return nil
}

func (s *batchSizes) writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sizes)
}

func (s *batchSizes) RecordRun(context.Context, sink.Run) error { return nil }

// A flusher with nothing to do takes the batch once a name leaves it two
// thirds full, so that less is left to write when the fetches end; a
// flusher still writing lets it fill to its limit, which bounds the
// INSERTs. A name's rows and outcome stay in one batch either way.
func TestBatchHandedEarlyOnlyToAnIdleFlusher(t *testing.T) {
	const limit, perName, names = 90, 10, 20
	rows := sink.Batch{Snapshots: make([]sink.Snapshot, perName)}
	for _, tt := range []struct {
		name string
		busy bool
		want []int
	}{
		// 60 rows are two thirds of 90: a batch every six names, and the
		// 20 rows of the last two names at the end.
		{"an idle flusher takes batches at two thirds", false, []int{60, 60, 60, 20}},
		// A first full batch keeps the flusher busy, and each write lasts
		// until the next batch is full.
		{"a busy flusher leaves them to fill", true, []int{90, 90, 90, 20}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sizes := &batchSizes{}
			log := slog.New(slog.DiscardHandler)
			w := newWriter(context.Background(), &store{sink: sizes, attempts: 1, log: log}, limit, 1<<30, time.Hour, "", log)
			var flusher gosync.WaitGroup
			flusher.Go(w.run)
			if tt.busy {
				sizes.wait = func(write int) {
					for w.fetched.Load() < min(int64(write+2)*limit, limit+names*perName) {
						time.Sleep(time.Millisecond)
					}
				}
				w.add("first.eth", &sink.Batch{Snapshots: make([]sink.Snapshot, limit)}, 0)
				w.recordOutcome("first.eth", nil)
			}
			handedOver := 0
			for range names {
				if !tt.busy {
					// The flusher has written every batch handed over
					// and is back at its wait before each name.
					for sizes.writes() < handedOver || !w.idle.Load() {
						time.Sleep(time.Millisecond)
					}
				}
				w.add("n.eth", &rows, 0)
				w.recordOutcome("n.eth", nil)
				w.mu.Lock()
				if w.batch.Len() == 0 {
					handedOver++
				}
				w.mu.Unlock()
			}
			w.close()
			flusher.Wait()
			if !slices.Equal(sizes.sizes, tt.want) {
				t.Errorf("batches of %v rows, want %v", sizes.sizes, tt.want)
			}
		})
	}
}

// A batch is not taken early while another name's rows are joining it (a
// long list's snapshots come back from disk in pieces): it is taken at
// the next name's end instead.
func TestBatchNotHandedEarlyDuringACommit(t *testing.T) {
	const limit, perName = 90, 10
	rows := sink.Batch{Snapshots: make([]sink.Snapshot, perName)}
	sizes := &batchSizes{}
	log := slog.New(slog.DiscardHandler)
	w := newWriter(context.Background(), &store{sink: sizes, attempts: 1, log: log}, limit, 1<<30, time.Hour, "", log)
	var flusher gosync.WaitGroup
	flusher.Go(w.run)
	for !w.idle.Load() {
		time.Sleep(time.Millisecond)
	}
	w.committing.RLock() // another name's commit, between two pieces
	for range 7 {
		w.add("n.eth", &rows, 0)
		w.recordOutcome("n.eth", nil)
	}
	w.mu.Lock()
	n := w.batch.Len()
	w.mu.Unlock()
	if n != 70 {
		t.Fatalf("the batch holds %d rows after seven names during a commit, want 70: taken early", n)
	}
	w.committing.RUnlock()
	w.add("n.eth", &rows, 0)
	w.recordOutcome("n.eth", nil)
	w.mu.Lock()
	n = w.batch.Len()
	w.mu.Unlock()
	if n != 0 {
		t.Errorf("the batch holds %d rows after the commit and a name more, want it taken", n)
	}
	w.close()
	flusher.Wait()
	if want := []int{80}; !slices.Equal(sizes.sizes, want) {
		t.Errorf("batches of %v rows, want %v", sizes.sizes, want)
	}
}
