package sync_test

import (
	"context"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// A batch that fills slowly is written once its first rows have waited
// the batch timeout, not at the end of the pass, and each project's rows
// at the tick, a long list's included, land in one batch.
func TestBatchTimeoutWritesRowsAsTheyWait(t *testing.T) {
	projects := apitest.Generate(8, 3, 5)
	// A long list, whose snapshot rows wait on disk and come back in
	// pieces when it is whole: a batch of 4000 rows stages 500 of a name
	// in memory, and holds every row of the pass.
	projects = append(projects, apitest.Generate(1, 700, 6)[0])
	projects[len(projects)-1].ID, projects[len(projects)-1].NFT = 999, "long.eth"
	srv := apitest.NewServer(apitest.WithProjects(projects...), apitest.WithLatency(40*time.Millisecond))
	t.Cleanup(srv.Close)
	api, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID, ClientSecret: apitest.DefaultClientSecret})
	if err != nil {
		t.Fatal(err)
	}
	out := &memSink{}
	s := sync.New(sync.Config{Source: api, Sink: out, Concurrency: 1, BatchRows: 4000, BatchTimeout: 100 * time.Millisecond,
		SpillDir: t.TempDir()})
	var names []string
	for _, p := range projects {
		names = append(names, p.NFT)
	}
	rep, err := s.Run(context.Background(), sync.Pass{Names: names, Trigger: sync.TriggerBackfill})
	if err != nil || len(rep.Failed) > 0 {
		t.Fatalf("pass: %v %v", err, rep.Failed)
	}
	// Nine names of two requests of 40 ms each, one after the other: the
	// pass takes about 0.7 s, seven times the timeout.
	if len(out.batches) < 3 {
		t.Errorf("%d batches written, want one every timeout's worth of rows", len(out.batches))
	}
	batchOf := map[int64]int{}
	for i, b := range out.batches {
		for _, r := range b.Snapshots {
			if j, ok := batchOf[r.ProjectID]; ok && j != i {
				t.Errorf("project %d's snapshots span batches %d and %d", r.ProjectID, j, i)
			}
			batchOf[r.ProjectID] = i
		}
	}
	var snapshots int
	for _, b := range out.batches {
		snapshots += len(b.Snapshots)
	}
	if want := 8*3 + 700; snapshots != want {
		t.Errorf("%d snapshot rows written, want %d", snapshots, want)
	}
}

// slowSink is a memSink whose writes take a while, so that fetching fills
// the next batch before the flusher is back.
type slowSink struct {
	memSink
	delay time.Duration
}

func (s *slowSink) Write(ctx context.Context, b *sink.Batch) error {
	time.Sleep(s.delay)
	return s.memSink.Write(ctx, b)
}

// A batch that times out while the next one is full and waiting for the
// flusher (back-pressure) is taken at a later tick: the flusher never
// waits for an add that waits for it.
func TestBatchTimeoutUnderBackPressure(t *testing.T) {
	projects := apitest.Generate(20, 40, 7)
	srv := apitest.NewServer(apitest.WithProjects(projects...))
	t.Cleanup(srv.Close)
	api, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID, ClientSecret: apitest.DefaultClientSecret})
	if err != nil {
		t.Fatal(err)
	}
	out := &slowSink{delay: 5 * time.Millisecond}
	// Batches of 100 rows stage 64 of a name, so that every list of 40
	// messages (80 rows) streams through the shared batch in pieces.
	s := sync.New(sync.Config{Source: api, Sink: out, Concurrency: 4, BatchRows: 100, BatchTimeout: time.Millisecond, SpillDir: t.TempDir()})
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(context.Background(), sync.Pass{Names: namesOfProjects(projects), Trigger: sync.TriggerBackfill})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the pass did not end within a minute: the flusher and a full batch wait for each other")
	}
	var snapshots int
	for _, b := range out.batches {
		snapshots += len(b.Snapshots)
	}
	if snapshots != 20*40 {
		t.Errorf("%d snapshot rows written, want %d", snapshots, 20*40)
	}
}
