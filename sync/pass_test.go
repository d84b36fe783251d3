package sync_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// memSink keeps what a pass writes; failWrites makes the first n writes
// fail, failRuns the first n run records.
type memSink struct {
	batches    []sink.Batch
	runs       []sink.Run
	failWrites int
	failRuns   int
	calls      int
}

func (m *memSink) Write(ctx context.Context, b *sink.Batch) error {
	m.calls++
	if err := ctx.Err(); err != nil {
		return err // as a database driver would
	}
	if m.failWrites > 0 {
		m.failWrites--
		return errors.New("server unavailable")
	}
	m.batches = append(m.batches, sink.Batch{
		Projects:  append([]sink.Project(nil), b.Projects...),
		Messages:  append([]sink.Message(nil), b.Messages...),
		Snapshots: append([]sink.Snapshot(nil), b.Snapshots...),
		Schedule:  b.Schedule,

		NameFailures:  append([]sink.NameFailure(nil), b.NameFailures...),
		NameSuccesses: append([]sink.NameSuccess(nil), b.NameSuccesses...),
	})
	return nil
}

func (m *memSink) RecordRun(ctx context.Context, r sink.Run) error {
	m.calls++
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.failRuns > 0 {
		m.failRuns--
		return errors.New("server unavailable")
	}
	m.runs = append(m.runs, r)
	return nil
}

func newSyncer(t *testing.T, out sink.Writer, batchRows int, projects ...apitest.Project) (*sync.Syncer, *apitest.Server) {
	t.Helper()
	srv := apitest.NewServer(apitest.WithProjects(projects...))
	t.Cleanup(srv.Close)
	api, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID, ClientSecret: apitest.DefaultClientSecret})
	if err != nil {
		t.Fatal(err)
	}
	return sync.New(sync.Config{Source: api, Sink: out, Concurrency: 1, BatchRows: batchRows, WriteBackoff: time.Millisecond}), srv
}

func TestFailedWriteFailsItsBatchOnly(t *testing.T) {
	projects := apitest.Generate(4, 1, 3) // 3 rows a name
	out := &memSink{failWrites: sync.DefaultWriteAttempts}
	s, _ := newSyncer(t, out, 6, projects...)
	var names []string
	for _, p := range projects {
		names = append(names, p.NFT)
	}
	rep, err := s.Run(context.Background(), sync.Pass{Names: names, Trigger: sync.TriggerBackfill})
	if err != nil {
		t.Fatal(err)
	}
	// Concurrency 1 keeps the order: the first batch (names 0 and 1) fails.
	if len(rep.Failed) != 2 || rep.Failed[0].NFT != names[0] || rep.Failed[1].NFT != names[1] {
		t.Fatalf("failed %v, want the first batch's two names", rep.Failed)
	}
	if !strings.Contains(rep.Failed[0].Error(), "write rows: server unavailable") {
		t.Errorf("failure does not carry the write error: %v", rep.Failed[0])
	}
	// The outcome of the last name follows its rows, in a batch of its
	// own at the end of the pass.
	var withRows []sink.Batch
	for _, b := range out.batches {
		if b.Len() > 0 {
			withRows = append(withRows, b)
		}
	}
	if len(withRows) != 1 || len(withRows[0].Snapshots) != 2 {
		t.Errorf("written batches with rows %d, want one with the last two names", len(withRows))
	}
	r := out.runs[0]
	if r.Status != sync.StatusPartial || r.NFTOK != 2 || r.NFTFailed != 2 || r.Messages != 2 {
		t.Errorf("run record %+v", r)
	}
}

func TestPassDefaultsAndDedupe(t *testing.T) {
	p := apitest.Project{ID: 5, NFT: "a.eth", Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 1, Percent: "100.00%"}}}
	out := &memSink{}
	s, srv := newSyncer(t, out, 0, p)
	before := time.Now().UTC().Truncate(time.Second)
	rep, err := s.Run(context.Background(), sync.Pass{Names: []string{"a.eth", "a.eth", "a.eth"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.RequestCount(apitest.DetailPath); n != 1 {
		t.Errorf("a repeated name was fetched %d times", n)
	}
	at := rep.Run.SnapshotAt
	if at.Before(before) || at.Nanosecond() != 0 || at.Location() != time.UTC {
		t.Errorf("default snapshot_at %v: want the pass start, UTC, whole seconds", at)
	}
	if snap := out.batches[0].Snapshots[0]; snap.SnapshotAt.Time() != at {
		t.Errorf("snapshot row stamped %v, run record %v", snap.SnapshotAt, at)
	}
	if rep.Run.Status != sync.StatusOK || rep.Run.NFTTotal != 1 || rep.Run.RunID == "" {
		t.Errorf("run %+v", rep.Run)
	}
}

// Every batch of a scheduled pass names its schedule, by which reads
// gained count the ticks missed between two snapshots; a backfill's none.
func TestBatchesCarryTheirSchedule(t *testing.T) {
	projects := apitest.Generate(3, 1, 3)
	var names []string
	for _, p := range projects {
		names = append(names, p.NFT)
	}
	for _, schedule := range []string{"hourly", ""} {
		out := &memSink{}
		s, _ := newSyncer(t, out, 4, projects...) // several batches
		if _, err := s.Run(context.Background(), sync.Pass{Names: names, Schedule: schedule}); err != nil {
			t.Fatal(err)
		}
		if len(out.batches) < 2 {
			t.Fatalf("%d batches; the fixture wants several", len(out.batches))
		}
		for i, b := range out.batches {
			if b.Schedule != schedule {
				t.Errorf("pass of schedule %q: batch %d has schedule %q", schedule, i, b.Schedule)
			}
		}
	}
}

func TestVersionsGrowAcrossPasses(t *testing.T) {
	p := apitest.Project{ID: 5, NFT: "a.eth", Messages: []apitest.Message{{ID: 1, Percent: "0.00%"}}}
	out := &memSink{}
	fixed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := apitest.NewServer(apitest.WithProjects(p))
	t.Cleanup(srv.Close)
	api, _ := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID, ClientSecret: apitest.DefaultClientSecret})
	// A clock that never moves: versions must still grow.
	s := sync.New(sync.Config{Source: api, Sink: out, Now: func() time.Time { return fixed }})
	for i := 0; i < 3; i++ {
		if _, err := s.Run(context.Background(), sync.Pass{Names: []string{"a.eth"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(out.batches); i++ {
		if out.batches[i].Snapshots[0].Version <= out.batches[i-1].Snapshots[0].Version {
			t.Fatalf("version did not grow: %d then %d", out.batches[i-1].Snapshots[0].Version, out.batches[i].Snapshots[0].Version)
		}
	}
}

func TestCancelledPassFailsRemainingNames(t *testing.T) {
	out := &memSink{}
	s, _ := newSyncer(t, out, 0, apitest.Generate(3, 1, 1)...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := s.Run(ctx, sync.Pass{Names: []string{"x", "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) != 2 || rep.Run.Status != sync.StatusFailed || len(out.runs) != 1 {
		t.Errorf("cancelled pass: failed %v, status %s, runs recorded %d", rep.Failed, rep.Run.Status, len(out.runs))
	}
}

// fastAndSlow serves two generated projects with the given number of
// messages each; the second one's details never arrive.
func fastAndSlow(t *testing.T, messages int) (*apiclient.Client, []apitest.Project) {
	t.Helper()
	projects := apitest.Generate(2, messages, 1)
	srv := apitest.NewServer(apitest.WithProjects(projects...), apitest.WithFault(projects[1].NFT, apitest.Slow(time.Minute)))
	t.Cleanup(srv.Close)
	api, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID, ClientSecret: apitest.DefaultClientSecret})
	if err != nil {
		t.Fatal(err)
	}
	return api, projects
}

// cancelOnFirstDone calls cancel once a name is done: in a pass over
// fastAndSlow's names, the fast name's rows are then with the writer while
// the slow one is still in flight.
func cancelOnFirstDone(cancel func()) func(sync.Progress) {
	return func(pr sync.Progress) {
		if pr.NamesDone == 1 {
			cancel()
		}
	}
}

// A pass cancelled while names are in flight still writes the names it had
// finished fetching.
func TestCancelledPassWritesFetchedRows(t *testing.T) {
	api, projects := fastAndSlow(t, 1)
	slow := projects[1].NFT
	out := &memSink{}
	s := sync.New(sync.Config{Source: api, Sink: out, Concurrency: 2})
	ctx, cancel := context.WithCancel(context.Background())
	rep, err := s.Run(ctx, sync.Pass{Names: []string{projects[0].NFT, slow}, Progress: cancelOnFirstDone(cancel)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) != 1 || rep.Failed[0].NFT != slow {
		t.Fatalf("failed %v, want only the slow name", rep.Failed)
	}
	if len(out.batches) != 1 || out.batches[0].Projects[0].NFT != projects[0].NFT {
		t.Fatalf("the fetched name's rows were not written: %d batches", len(out.batches))
	}
}

// A pass that its deadline cuts off says so once, with the cause the
// deadline was given, and reports its unfinished names as cut off, not as
// a request timeout of their own.
func TestCutOffPassSaysSoOnce(t *testing.T) {
	projects := apitest.Generate(3, 2, 7)
	var opts []apitest.Option
	for _, p := range projects {
		opts = append(opts, apitest.WithFault(p.NFT, apitest.Slow(time.Minute)))
	}
	srv := apitest.NewServer(append(opts, apitest.WithProjects(projects...))...)
	t.Cleanup(srv.Close)
	api, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID, ClientSecret: apitest.DefaultClientSecret})
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	out := &memSink{}
	s := sync.New(sync.Config{Source: api, Sink: out, Concurrency: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cause := errors.New("cut off by the next tick at 2026-01-01T11:00:00Z")
	ctx, cancel := context.WithDeadlineCause(context.Background(), time.Now().Add(300*time.Millisecond), cause)
	defer cancel()
	var names []string
	for _, p := range projects {
		names = append(names, p.NFT)
	}
	rep, err := s.Run(ctx, sync.Pass{Names: names})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) != 3 {
		t.Fatalf("failed %v, want every name", rep.Failed)
	}
	for _, f := range rep.Failed {
		if !f.CutOff() || f.Err.Error() != cause.Error() {
			t.Errorf("%v: want the name cut off by %q", f, cause)
		}
	}
	want := `3 of 3 names failed: nft "proj-00000.dmail", "proj-00001.dmail", "proj-00002.dmail": ` + cause.Error()
	if got := out.runs[0].Error; got != want {
		t.Errorf("run error %q, want %q", got, want)
	}
	if n := strings.Count(logs.String(), "pass cut off"); n != 1 || strings.Contains(logs.String(), "name failed") ||
		!strings.Contains(logs.String(), "deadline=") || !strings.Contains(logs.String(), cause.Error()) {
		t.Errorf("want one line saying the pass was cut off, with its deadline and cause, and none per name:\n%s", logs.String())
	}
}
