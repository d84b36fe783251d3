package sync_test

import (
	"context"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/sync"
)

// A long list flows through in batches of the configured size instead of
// being held whole until it ends.
func TestLongListStreamsInBatches(t *testing.T) {
	projects := apitest.Generate(1, 5000, 2)
	out := &memSink{}
	s, _ := newSyncer(t, out, 800, projects...)
	rep, err := s.Run(context.Background(), sync.Pass{Names: []string{projects[0].NFT}})
	if err != nil || len(rep.Failed) != 0 {
		t.Fatalf("run: %v, failed %v", err, rep.Failed)
	}
	spill := 100 // BatchRows/8
	total := 0
	for i, b := range out.batches {
		if b.Len() > 800+spill {
			t.Errorf("batch %d holds %d rows, want at most %d", i, b.Len(), 800+spill)
		}
		total += b.Len()
	}
	if total != 1+2*5000 || len(out.batches) < 12 {
		t.Errorf("%d rows in %d batches, want %d rows in at least 12", total, len(out.batches), 1+2*5000)
	}
	if rep.Run.Messages != 5000 {
		t.Errorf("run counts %d snapshots, want 5000", rep.Run.Messages)
	}
}

// When a long list breaks after some of its rows were already handed on,
// the retry's rows carry a newer version, so they win under FINAL.
func TestRetriedLongListSupersedesSpilledRows(t *testing.T) {
	projects := apitest.Generate(1, 3000, 4)
	srv := apitest.NewServer(apitest.WithProjects(projects...),
		apitest.WithListFault(projects[0].ID, apitest.FailFirst(1, apitest.Truncated(0))))
	t.Cleanup(srv.Close)
	api, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID,
		ClientSecret: apitest.DefaultClientSecret, MaxRetries: 1, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	out := &memSink{}
	s := sync.New(sync.Config{Source: api, Sink: out, Concurrency: 1, BatchRows: 400})
	rep, err := s.Run(context.Background(), sync.Pass{Names: []string{projects[0].NFT}})
	if err != nil || len(rep.Failed) != 0 {
		t.Fatalf("run: %v, failed %v", err, rep.Failed)
	}
	latest := map[int64]uint64{}
	seen := 0
	for _, b := range out.batches {
		for _, sn := range b.Snapshots {
			seen++
			if sn.Version > latest[sn.MessageID] {
				latest[sn.MessageID] = sn.Version
			}
		}
	}
	if len(latest) != 3000 {
		t.Fatalf("%d messages have snapshots, want 3000", len(latest))
	}
	if seen <= 3000 {
		t.Fatalf("%d snapshot rows: the broken attempt spilled nothing, the test proves nothing", seen)
	}
	// Every message's newest row is from the complete attempt: one version.
	versions := map[uint64]bool{}
	for _, v := range latest {
		versions[v] = true
	}
	if len(versions) != 1 {
		t.Errorf("newest rows carry %d versions, want the retry's only", len(versions))
	}
}

// Progress is reported once a name, and the last report counts them all.
func TestProgressCountsEveryName(t *testing.T) {
	projects := apitest.Generate(9, 3, 5)
	out := &memSink{}
	s, _ := newSyncer(t, out, 0, projects...)
	var names []string
	for _, p := range projects {
		names = append(names, p.NFT)
	}
	names = append(names, "nobody.eth", names[0])
	var reports []sync.Progress
	_, err := s.Run(context.Background(), sync.Pass{Names: names, Progress: func(p sync.Progress) { reports = append(reports, p) }})
	if err != nil {
		t.Fatal(err)
	}
	last := reports[len(reports)-1]
	if len(reports) != 10 || last != (sync.Progress{NamesTotal: 10, NamesDone: 10, NamesFailed: 1, Rows: 9 * 7}) {
		t.Errorf("%d reports, last %+v", len(reports), last)
	}
}
