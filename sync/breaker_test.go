package sync_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/sync"
)

// The breaker's rule, outcome by outcome: only BreakerThreshold names in a
// row that found no upstream trip it; any answer starts the count again.
func TestBreakerRule(t *testing.T) {
	down := &apiclient.StatusError{StatusCode: 503}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	envelope := fmt.Errorf("project details: %w", &apiclient.EnvelopeError{Code: "0", Msg: "Process failed"})
	notFound := &apiclient.StatusError{StatusCode: 404}
	repeat := func(n int, err error) []error {
		out := make([]error, n)
		for i := range out {
			out[i] = err
		}
		return out
	}
	join := func(parts ...[]error) []error {
		var out []error
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	const n = sync.BreakerThreshold
	tests := []struct {
		name     string
		outcomes []error
		tripsAt  int // index of the outcome that trips it, -1 for never
	}{
		{"threshold unavailable names trip it", repeat(n, refused), n - 1},
		{"5xx counts like a refusal", join(repeat(n-1, refused), []error{down}), n - 1},
		{"one short does not", repeat(n-1, refused), -1},
		{"a success in between starts again", join(repeat(n-1, refused), []error{nil}, repeat(n-1, down)), -1},
		{"a failure envelope is an answer", join(repeat(n-1, refused), []error{envelope}, repeat(n-1, refused)), -1},
		{"a 404 is an answer", join(repeat(n-1, down), []error{notFound}, repeat(n-1, down)), -1},
		{"one bad name among good ones never does", join([]error{nil, down, nil, down, nil, down, nil, down, nil, down, nil, down}), -1},
		{"it trips once", repeat(3*n, refused), n - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []bool
			b := sync.NewBreaker(func(open bool) { seen = append(seen, open) })
			trippedAt := -1
			for i, err := range tt.outcomes {
				if b.Record(err) {
					if trippedAt >= 0 {
						t.Fatalf("tripped again at %d", i)
					}
					trippedAt = i
				}
			}
			if trippedAt != tt.tripsAt {
				t.Fatalf("tripped at %d, want %d", trippedAt, tt.tripsAt)
			}
			if (b.Cause() != nil) != (tt.tripsAt >= 0) {
				t.Errorf("Cause() = %v", b.Cause())
			}
			if tt.tripsAt >= 0 && (len(seen) == 0 || !seen[len(seen)-1]) {
				t.Errorf("observer saw %v, want it told of the trip", seen)
			}
		})
	}
}

// The text a pass gives for the names its breaker cut off.
func TestOutageErrorMessage(t *testing.T) {
	last := errors.New(`project details of nft "e.eth": after 5 attempts: dial tcp 127.0.0.1:9: connect: connection refused`)
	err := &sync.OutageError{Names: 5, Last: last}
	want := `upstream unavailable: 5 names in a row failed with no answer from it, the last with project details of nft "e.eth": ` +
		`after 5 attempts: dial tcp 127.0.0.1:9: connect: connection refused; not asked in this pass, the next pass asks again`
	if err.Error() != want {
		t.Errorf("got\n %s\nwant\n %s", err, want)
	}
	if !errors.Is(err, last) {
		t.Errorf("the last failure is not in the chain")
	}
}

// lockedLog is a log destination for a pass whose workers log at once.
type lockedLog struct {
	mu gosync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// countingClient is a client for base whose attempts, retries included,
// are counted in attempts, and whose retries and failures log to log.
func countingClient(t *testing.T, base string, attempts *atomic.Int64, log *slog.Logger) *apiclient.Client {
	t.Helper()
	api, err := apiclient.New(apiclient.Config{BaseURL: base, ClientID: apitest.DefaultClientID, ClientSecret: apitest.DefaultClientSecret,
		MaxRetries: 4, RetryBackoff: time.Millisecond, RequestTimeout: 5 * time.Second, Logger: log,
		// A fresh connection per request, so every reset reaches the retry
		// logic instead of being retried by net/http itself.
		HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		Observe:    func(string, string, time.Duration) { attempts.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// An upstream that refuses connections costs a pass a first wave of names,
// not one failure per name: the pass stops asking, fails the others with
// the one cause, says so once, and the next pass, with the upstream back,
// writes every name.
func TestPassStopsAskingAnUnavailableUpstream(t *testing.T) {
	const names = 5000
	projects := apitest.Generate(names, 1, 21)
	// A port nothing listens on, until the upstream comes back on it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	logs := &lockedLog{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	var attempts atomic.Int64
	var states []bool
	var statesMu gosync.Mutex
	out := &memSink{}
	const concurrency = 8
	s := sync.New(sync.Config{Source: countingClient(t, "http://"+addr, &attempts, log), Sink: out, Concurrency: concurrency,
		Logger: log, ObserveBreaker: func(open bool) {
			statesMu.Lock()
			defer statesMu.Unlock()
			states = append(states, open)
		}})
	pass := sync.Pass{Names: namesOfProjects(projects), Trigger: sync.TriggerBackfill}

	rep, err := s.Run(context.Background(), pass)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) != names || rep.Run.Status != sync.StatusFailed || rep.Run.NFTFailed != names {
		t.Fatalf("%d names failed, status %s; want all %d, failed", len(rep.Failed), rep.Run.Status, names)
	}
	own, groups := sync.Grouped(rep.Failed)
	if len(groups) != 1 || !groups[0].CutOff || len(own)+len(groups[0].Names) != names {
		t.Fatalf("%d names failed on their own and groups %d, want the rest in one cut-off group", len(own), len(groups))
	}
	var outage *sync.OutageError
	if !errors.As(rep.Failed[len(rep.Failed)-1].Err, &outage) || !strings.Contains(groups[0].Cause, "connection refused") {
		t.Errorf("cut-off cause %q, want the outage with its last refusal", groups[0].Cause)
	}
	for _, f := range own {
		if !strings.Contains(f.Err.Error(), "connection refused") {
			t.Errorf("%v: want a refusal", f)
		}
	}
	// The first wave only: the names in flight and those that tripped it,
	// each with its retries. Far below names × attempts.
	if n, most := attempts.Load(), int64((concurrency+sync.BreakerThreshold)*5); n > most {
		t.Errorf("%d request attempts, want at most %d", n, most)
	}
	text := logs.String()
	if n := strings.Count(text, "upstream unavailable: the pass stopped asking"); n != 1 {
		t.Errorf("outage logged %d times, want once:\n%s", n, text)
	}
	if n := strings.Count(text, `msg="name failed"`); n != len(own) || n > concurrency+sync.BreakerThreshold {
		t.Errorf("%d names logged as failed, want the %d of the first wave", n, len(own))
	}
	if want := fmt.Sprintf("names_cut_off=%d", len(groups[0].Names)); !strings.Contains(text, want) {
		t.Errorf("the outage line does not say %s", want)
	}
	if wantPrefix := fmt.Sprintf("%d of %d names failed: ", names, names); !strings.HasPrefix(rep.Run.Error, wantPrefix) ||
		!strings.Contains(rep.Run.Error, " more: upstream unavailable: ") {
		t.Errorf("run error %q: want the cut-off names given the outage once", rep.Run.Error)
	}

	// The upstream is back: the next pass asks again and gets every name.
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	srv := apitest.NewServer(apitest.WithListener(l), apitest.WithProjects(projects...))
	t.Cleanup(srv.Close)
	rep, err = s.Run(context.Background(), pass)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) != 0 || rep.Run.Status != sync.StatusOK || rep.Run.Messages != names {
		t.Fatalf("after recovery: %d failed, status %s, %d snapshots", len(rep.Failed), rep.Run.Status, rep.Run.Messages)
	}
	statesMu.Lock()
	defer statesMu.Unlock()
	if len(states) != 2 || !states[0] || states[1] {
		t.Errorf("breaker states %v, want open then closed", states)
	}
}

// Faults that retries cure, on most names, trip nothing: every name
// arrives, however many requests failed on the way.
func TestFlakyUpstreamTripsNothing(t *testing.T) {
	projects := apitest.Generate(100, 2, 22)
	faults := []apitest.Fault{
		apitest.StatusFault(503, "<html>busy</html>"),
		apitest.ConnReset(),
		apitest.StatusFault(502, "bad gateway"),
		apitest.RateLimited("0"),
		apitest.Truncated(10),
	}
	var opts []apitest.Option
	for i, p := range projects {
		if i%5 >= 3 { // 60% of the names are flaky
			continue
		}
		f := apitest.FailFirst(1+i%4, faults[i%len(faults)])
		if i%2 == 0 {
			opts = append(opts, apitest.WithFault(p.NFT, f))
		} else {
			opts = append(opts, apitest.WithListFault(p.ID, f))
		}
	}
	srv := apitest.NewServer(append(opts, apitest.WithProjects(projects...))...)
	t.Cleanup(srv.Close)
	var attempts atomic.Int64
	var trips atomic.Int32
	out := &memSink{}
	s := sync.New(sync.Config{Source: countingClient(t, srv.URL, &attempts, nil), Sink: out, Concurrency: 8,
		ObserveBreaker: func(open bool) {
			if open {
				trips.Add(1)
			}
		}})
	rep, err := s.Run(context.Background(), sync.Pass{Names: namesOfProjects(projects)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) != 0 || rep.Run.Messages != 200 || trips.Load() != 0 {
		t.Fatalf("failed %v, %d snapshots, %d trips; want none failed, 200, 0", rep.Failed, rep.Run.Messages, trips.Load())
	}
	if n := attempts.Load(); n < 2*100+100 {
		t.Errorf("only %d attempts: the faults did not fire", n)
	}
}

// Names the upstream does not know are given once, together, in the run
// record, beside names that failed for reasons of their own.
func TestUnknownNamesAreGrouped(t *testing.T) {
	projects := apitest.Generate(3, 1, 23)
	srv := apitest.NewServer(apitest.WithProjects(projects...),
		apitest.WithFault(projects[0].NFT, apitest.StatusFault(404, "gone")))
	t.Cleanup(srv.Close)
	var attempts atomic.Int64
	out := &memSink{}
	s := sync.New(sync.Config{Source: countingClient(t, srv.URL, &attempts, nil), Sink: out, Concurrency: 1})
	rep, err := s.Run(context.Background(), sync.Pass{Names: append(namesOfProjects(projects), "typo.eth", "nobody.eth")})
	if err != nil {
		t.Fatal(err)
	}
	want := `3 of 5 names failed: nft "proj-00000.dmail": project details of nft "proj-00000.dmail": HTTP 404 Not Found: gone; ` +
		`nft "nobody.eth", "typo.eth": upstream reported failure for their project details; ` +
		`the nft name may not be registered: the API answers so for a name it does not know, and gives no other sign`
	if got := rep.Run.Error; got != want {
		t.Errorf("run error\n %s\nwant\n %s", got, want)
	}
}

func namesOfProjects(projects []apitest.Project) []string {
	names := make([]string, len(projects))
	for i, p := range projects {
		names[i] = p.NFT
	}
	return names
}
