package sync_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// memSpool keeps what a pass spools; full makes it refuse everything.
type memSpool struct {
	batches []sink.Batch
	runs    []sink.Run
	full    bool
}

func (m *memSpool) PutBatch(b *sink.Batch) error {
	if m.full {
		return errors.New("spool is full")
	}
	m.batches = append(m.batches, sink.Batch{Snapshots: append([]sink.Snapshot(nil), b.Snapshots...)})
	return nil
}

func (m *memSpool) PutRun(r sink.Run) error {
	if m.full {
		return errors.New("spool is full")
	}
	m.runs = append(m.runs, r)
	return nil
}

func spoolingSyncer(t *testing.T, out *memSink, sp *memSpool, projects []apitest.Project) (*sync.Syncer, []string) {
	t.Helper()
	srv := apitest.NewServer(apitest.WithProjects(projects...))
	t.Cleanup(srv.Close)
	api, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID, ClientSecret: apitest.DefaultClientSecret})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range projects {
		names = append(names, p.NFT)
	}
	return sync.New(sync.Config{Source: api, Sink: out, Spool: sp, Concurrency: 2, BatchRows: 5, WriteBackoff: time.Millisecond}), names
}

func snapshotsIn(batches []sink.Batch) int {
	n := 0
	for _, b := range batches {
		n += len(b.Snapshots)
	}
	return n
}

func TestRowsTheSinkRefusesGoToTheSpool(t *testing.T) {
	out := &memSink{failWrites: 1 << 30, failRuns: 1 << 30}
	sp := &memSpool{}
	s, names := spoolingSyncer(t, out, sp, apitest.Generate(6, 3, 1))
	rep, err := s.Run(context.Background(), sync.Pass{Names: names, Trigger: sync.TriggerBackfill})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(rep.Failed) != 0 || rep.Rows != 0 || rep.Spooled != 6*(1+3+3) || !rep.RunSpooled {
		t.Fatalf("report: failed %v, rows %d, spooled %d, run spooled %t", rep.Failed, rep.Rows, rep.Spooled, rep.RunSpooled)
	}
	if n := snapshotsIn(sp.batches); n != 18 {
		t.Errorf("spooled %d snapshots, want 18", n)
	}
	if len(sp.runs) != 1 || sp.runs[0].Messages != 18 || !strings.Contains(sp.runs[0].Error, "42 rows spooled") {
		t.Errorf("spooled run record %+v", sp.runs)
	}
	// The first write was tried the configured number of times; once the
	// sink is known to be down, each later write gets one try.
	if want := sync.DefaultWriteAttempts + len(sp.batches); out.calls != want {
		t.Errorf("sink called %d times, want %d", out.calls, want)
	}
}

func TestWritesAreRetriedBeforeSpooling(t *testing.T) {
	out := &memSink{failWrites: sync.DefaultWriteAttempts - 1, failRuns: sync.DefaultWriteAttempts - 1}
	sp := &memSpool{}
	s, names := spoolingSyncer(t, out, sp, apitest.Generate(1, 3, 1))
	rep, err := s.Run(context.Background(), sync.Pass{Names: names})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Spooled != 0 || rep.RunSpooled || len(sp.batches) != 0 || snapshotsIn(out.batches) != 3 || len(out.runs) != 1 {
		t.Errorf("spooled %d, run spooled %t, written snapshots %d, runs %d", rep.Spooled, rep.RunSpooled, snapshotsIn(out.batches), len(out.runs))
	}
}

func TestShutdownSpoolsWithoutWaitingOnTheSink(t *testing.T) {
	api, projects := fastAndSlow(t, 2)
	out, sp := &memSink{}, &memSpool{}
	s := sync.New(sync.Config{Source: api, Sink: out, Spool: sp, Concurrency: 2})
	ctx, cancel := context.WithCancelCause(context.Background())
	shutdown := cancelOnFirstDone(func() { cancel(sync.ErrShutdown) })
	rep, err := s.Run(ctx, sync.Pass{Names: []string{projects[0].NFT, projects[1].NFT}, Progress: shutdown})
	if err != nil {
		t.Fatal(err)
	}
	if out.calls != 0 {
		t.Errorf("sink called %d times after shutdown began", out.calls)
	}
	if len(rep.Failed) != 1 || snapshotsIn(sp.batches) != 2 || len(sp.runs) != 1 {
		t.Errorf("failed %v, spooled snapshots %d, runs %d: want the fetched name's rows and the record spooled",
			rep.Failed, snapshotsIn(sp.batches), len(sp.runs))
	}
}

func TestFullSpoolFailsTheNames(t *testing.T) {
	out := &memSink{failWrites: 1 << 30, failRuns: 1 << 30}
	sp := &memSpool{full: true}
	s, names := spoolingSyncer(t, out, sp, apitest.Generate(2, 1, 1))
	rep, err := s.Run(context.Background(), sync.Pass{Names: names})
	if err == nil || !strings.Contains(err.Error(), "server unavailable; and spool is full") {
		t.Errorf("run error %v, want both reasons the record was lost", err)
	}
	if len(rep.Failed) != 2 || rep.Spooled != 0 {
		t.Fatalf("failed %v, spooled %d", rep.Failed, rep.Spooled)
	}
	if msg := rep.Failed[0].Error(); !strings.Contains(msg, "write rows: server unavailable; and spool is full") {
		t.Errorf("failure %q does not give both reasons", msg)
	}
}
