package sync_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// Each name a pass asks for leaves a row of its outcome with the pass's
// rows: a success, or a failure with the stage that failed, its kind, the
// HTTP status and the attempts it took.
func TestEachNameLeavesItsOutcome(t *testing.T) {
	good := apitest.Project{ID: 1, NFT: "good.eth", Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 2, Percent: "50.00%"}}}
	empty := apitest.Project{ID: 2, NFT: "empty.eth"}
	listed := apitest.Project{ID: 3, NFT: "unlisted.eth"}
	want := map[string]sink.NameFailure{
		"missing.eth":   {Stage: sync.StageDetails, Kind: sync.KindNotFound, Attempts: 2},
		"forbidden.eth": {Stage: sync.StageDetails, Kind: sync.KindHTTP4xx, HTTPStatus: http.StatusForbidden, Attempts: 1},
		"broken.eth":    {Stage: sync.StageDetails, Kind: sync.KindHTTP5xx, HTTPStatus: http.StatusBadGateway, Attempts: 2},
		"garbled.eth":   {Stage: sync.StageDetails, Kind: sync.KindDecode, Attempts: 2},
		"unlisted.eth":  {Stage: sync.StageList, Kind: sync.KindRefused, Attempts: 2},
		"slow.eth":      {Stage: sync.StageDetails, Kind: sync.KindTimeout, Attempts: 2},
	}
	srv := apitest.NewServer(apitest.WithProjects(good, empty, listed),
		apitest.WithFault("missing.eth", apitest.FailureEnvelope()),
		apitest.WithFault("forbidden.eth", apitest.StatusFault(http.StatusForbidden, `{"msg":"no"}`)),
		apitest.WithFault("broken.eth", apitest.StatusFault(http.StatusBadGateway, "")),
		apitest.WithFault("garbled.eth", apitest.InvalidJSON()),
		apitest.WithListFault(listed.ID, apitest.FailureEnvelope()),
		apitest.WithFault("slow.eth", apitest.Slow(2*time.Second)))
	t.Cleanup(srv.Close)
	api, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID, ClientSecret: apitest.DefaultClientSecret,
		MaxRetries: 1, RetryBackoff: time.Millisecond, RequestTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	out := &memSink{}
	s := sync.New(sync.Config{Source: api, Sink: out, Concurrency: 2, WriteBackoff: time.Millisecond})
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	names := []string{"good.eth", "empty.eth", "missing.eth", "forbidden.eth", "broken.eth", "garbled.eth", "unlisted.eth", "slow.eth"}
	rep, err := s.Run(context.Background(), sync.Pass{Names: names, Schedule: "hourly", Trigger: sync.TriggerCron, SnapshotAt: at, Shard: "1/2"})
	if err != nil {
		t.Fatal(err)
	}
	var failures []sink.NameFailure
	succeeded := map[string]bool{}
	for _, b := range out.batches {
		if b.Schedule != "hourly" {
			t.Errorf("a batch of schedule %q", b.Schedule)
		}
		failures = append(failures, b.NameFailures...)
		for _, ok := range b.NameSuccesses {
			if !ok.SnapshotAt.Equal(at) {
				t.Errorf("success of %s at %v, want the pass's %v", ok.NFT, ok.SnapshotAt, at)
			}
			succeeded[ok.NFT] = true
		}
	}
	if len(succeeded) != 2 || !succeeded["good.eth"] || !succeeded["empty.eth"] {
		t.Errorf("successes %v, want good.eth and empty.eth, a project with no message included", succeeded)
	}
	if len(failures) != len(want) {
		t.Fatalf("%d failure rows, want %d: %+v", len(failures), len(want), failures)
	}
	for _, f := range failures {
		w, ok := want[f.NFT]
		if !ok {
			t.Errorf("a failure row for %s", f.NFT)
			continue
		}
		if f.RunID != rep.Run.RunID || !f.SnapshotAt.Equal(at) || f.Shard != "1/2" {
			t.Errorf("%s: pass %s at %v shard %q, want %s at %v shard 1/2", f.NFT, f.RunID, f.SnapshotAt, f.Shard, rep.Run.RunID, at)
		}
		if f.Stage != w.Stage || f.Kind != w.Kind || f.HTTPStatus != w.HTTPStatus || f.Attempts != w.Attempts {
			t.Errorf("%s: stage %s kind %s status %d attempts %d, want %s %s %d %d", f.NFT, f.Stage, f.Kind, f.HTTPStatus, f.Attempts, w.Stage, w.Kind, w.HTTPStatus, w.Attempts)
		}
		if f.Error == "" || strings.Contains(f.Error, apitest.DefaultClientSecret) {
			t.Errorf("%s: error %q, want the cause without the secret", f.NFT, f.Error)
		}
	}
}

// A name the breaker kept the pass from asking for, and one the end of the
// pass cut off, are told apart from the name's own failures.
func TestFailureKinds(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{apiclient.ErrNotRegistered, sync.KindNotFound},
		{&apiclient.StatusError{StatusCode: 429}, sync.KindHTTP429},
		{&apiclient.AttemptsError{Attempts: 3, Err: &apiclient.StatusError{StatusCode: 503}}, sync.KindHTTP5xx},
		{&apiclient.EnvelopeError{Code: "0"}, sync.KindRefused},
		{apiclient.ErrResponseTooLarge, sync.KindDecode},
		{context.DeadlineExceeded, sync.KindTimeout},
		{context.Canceled, sync.KindCutOff},
	} {
		if got := sync.FailureKind(tt.err); got != tt.want {
			t.Errorf("FailureKind(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}
