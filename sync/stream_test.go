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

// listServer serves projects with a list fault on the first one, through a
// client that retries once.
func listServer(t *testing.T, projects []apitest.Project, fault apitest.Fault) sync.Source {
	t.Helper()
	srv := apitest.NewServer(apitest.WithProjects(projects...), apitest.WithListFault(projects[0].ID, fault))
	t.Cleanup(srv.Close)
	api, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID,
		ClientSecret: apitest.DefaultClientSecret, MaxRetries: 1, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// When a long list breaks after some of its rows were already handed on,
// the retry's rows carry a newer version, so they win under FINAL; and
// the broken attempt's snapshots never leave the pass: a project's rows at
// a tick are one attempt's, all of them with one version.
func TestRetriedLongListSupersedesSpilledRows(t *testing.T) {
	projects := apitest.Generate(1, 3000, 4)
	out := &memSink{}
	s := sync.New(sync.Config{Source: listServer(t, projects, apitest.FailFirst(1, apitest.Truncated(0))),
		Sink: out, Concurrency: 1, BatchRows: 400, SpillDir: t.TempDir()})
	rep, err := s.Run(context.Background(), sync.Pass{Names: []string{projects[0].NFT}})
	if err != nil || len(rep.Failed) != 0 {
		t.Fatalf("run: %v, failed %v", err, rep.Failed)
	}
	messages := map[int64]uint64{}
	seen := 0
	for _, b := range out.batches {
		for _, m := range b.Messages {
			seen++
			messages[m.ID] = max(messages[m.ID], m.Version)
		}
	}
	if len(messages) != 3000 || seen <= 3000 {
		t.Fatalf("%d message rows of %d messages: the broken attempt spilled nothing, the test proves nothing", seen, len(messages))
	}
	versions := map[uint64]int{}
	for _, b := range out.batches {
		for _, sn := range b.Snapshots {
			versions[sn.Version]++
			if sn.Version != messages[sn.MessageID] {
				t.Fatalf("snapshot of message %d has version %d, its newest message row %d", sn.MessageID, sn.Version, messages[sn.MessageID])
			}
		}
	}
	if len(versions) != 1 || snapshotsIn(out.batches) != 3000 || rep.Run.Messages != 3000 {
		t.Errorf("snapshot rows by version %v, run counts %d: want 3000 rows of one version", versions, rep.Run.Messages)
	}
}

// A long list that breaks off for good leaves no snapshot of its project:
// a tick with part of them would read as a drop. The run counts the other
// names' snapshots, each once.
func TestBrokenLongListWritesNoSnapshots(t *testing.T) {
	projects := append(apitest.Generate(1, 3000, 4), apitest.Generate(2, 7, 5)[1])
	out := &memSink{}
	s := sync.New(sync.Config{Source: listServer(t, projects, apitest.Truncated(0)),
		Sink: out, Concurrency: 2, BatchRows: 400, SpillDir: t.TempDir()})
	rep, err := s.Run(context.Background(), sync.Pass{Names: []string{projects[0].NFT, projects[1].NFT}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) != 1 || rep.Failed[0].NFT != projects[0].NFT {
		t.Fatalf("failed %v, want the broken list's name", rep.Failed)
	}
	broken, messages := 0, 0
	for _, b := range out.batches {
		messages += len(b.Messages)
		for _, sn := range b.Snapshots {
			if sn.ProjectID == projects[0].ID {
				broken++
			}
		}
	}
	if messages < 400 {
		t.Fatalf("%d message rows written: the broken list streamed nothing, the test proves nothing", messages)
	}
	if broken != 0 {
		t.Errorf("%d snapshot rows of the broken list written, want none", broken)
	}
	if got, want := snapshotsIn(out.batches), len(projects[1].Messages); got != want || rep.Run.Messages != uint64(want) {
		t.Errorf("%d snapshot rows written, run counts %d, want %d of each", got, rep.Run.Messages, want)
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
