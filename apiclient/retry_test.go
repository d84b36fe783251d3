package apiclient_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/apiclient/apitest"
)

// retryLog collects the client's retry warnings.
type retryLog struct {
	mu    sync.Mutex
	waits []int64
	lines []string
}

func (l *retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *retryLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "wait_ms" {
			l.waits = append(l.waits, a.Value.Int64())
		}
		b.WriteString(" " + a.String())
		return true
	})
	l.lines = append(l.lines, b.String())
	return nil
}
func (l *retryLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *retryLog) WithGroup(string) slog.Handler      { return l }

func retrying(log *retryLog) func(*apiclient.Config) {
	return func(c *apiclient.Config) {
		c.MaxRetries = 4
		c.RetryBackoff = time.Millisecond
		// Far above a loopback request on a loaded machine, and below the
		// Slow(2s) faults that must time out.
		c.RequestTimeout = time.Second
		c.Logger = slog.New(log)
		// Resets are only seen by a client that does not reuse connections:
		// net/http retries a GET on a reused connection by itself.
		c.HTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	}
}

func TestTransientFailuresAreRetried(t *testing.T) {
	project := apitest.Project{ID: 7, NFT: "p.eth", CreateAt: "2026-01-01 00:00:00",
		Messages: []apitest.Message{{ID: 1, Percent: "10.00%"}, {ID: 2, Percent: "20.00%"}, {ID: 3, Percent: "30.00%"}}}
	tests := []struct {
		name  string
		fault apitest.Fault
		fails int // requests that fail before one succeeds
	}{
		{"5xx with an html body", apitest.StatusFault(502, "<html><h1>Bad Gateway</h1></html>"), 3},
		{"503", apitest.StatusFault(503, `{"error":"maintenance"}`), 4},
		{"429 without Retry-After", apitest.StatusFault(429, "slow down"), 2},
		{"408", apitest.StatusFault(408, "timeout"), 1},
		{"connection reset", apitest.ConnReset(), 2},
		{"truncated body", apitest.Truncated(40), 2},
		{"invalid json", apitest.InvalidJSON(), 1},
		{"slower than the request timeout", apitest.Slow(2 * time.Second), 1},
		{"failure envelope once", apitest.FailureEnvelope(), 1},
	}
	for _, tt := range tests {
		for _, list := range []bool{false, true} {
			name := tt.name + "/details"
			if list {
				name = tt.name + "/list"
			}
			t.Run(name, func(t *testing.T) {
				opt := apitest.WithFault("p.eth", apitest.FailFirst(tt.fails, tt.fault))
				if list {
					opt = apitest.WithListFault(7, apitest.FailFirst(tt.fails, tt.fault))
				}
				srv := newServer(t, opt, apitest.WithProjects(project))
				log := &retryLog{}
				c := newClient(t, srv, retrying(log))
				path := apiclient.DetailsPath
				if list {
					path = apiclient.ListPath
					var got []int64
					restarts := 0
					err := c.ListMessages(context.Background(), 7, func(m apiclient.Message) error {
						got = append(got, m.ID)
						return nil
					}, func() { restarts++; got = got[:0] })
					if err != nil {
						t.Fatalf("ListMessages: %v", err)
					}
					if len(got) != 3 || got[0] != 1 || got[2] != 3 {
						t.Errorf("messages %v after %d restarts, want [1 2 3] once", got, restarts)
					}
				} else if _, err := c.ProjectDetails(context.Background(), "p.eth"); err != nil {
					t.Fatalf("ProjectDetails: %v", err)
				}
				if n := srv.RequestCount(path); n != tt.fails+1 {
					t.Errorf("%d requests, want %d", n, tt.fails+1)
				}
				if len(log.lines) != tt.fails {
					t.Errorf("%d retry warnings, want %d: %q", len(log.lines), tt.fails, log.lines)
				}
				for _, l := range log.lines {
					if strings.Contains(l, secret) {
						t.Errorf("retry warning leaks the secret: %s", l)
					}
					// The URL once, as its own attribute, whatever the failure.
					if n := strings.Count(l, path); n != 1 || !strings.Contains(l, " url="+srv.URL+path+"?") {
						t.Errorf("retry warning names %s %d times, want once as url=: %s", path, n, l)
					}
				}
			})
		}
	}
}

func TestRetriesGiveUp(t *testing.T) {
	project := apitest.Project{ID: 7, NFT: "p.eth", Messages: []apitest.Message{{ID: 1}}}
	tests := []struct {
		name     string
		fault    apitest.Fault
		mod      func(*apiclient.Config)
		requests int
		want     string
	}{
		{"5xx every time", apitest.StatusFault(500, "boom"), nil, 5, "after 5 attempts: HTTP 500 Internal Server Error: boom"},
		{"failure envelope twice", apitest.FailureEnvelope(), nil, 2, "after 2 attempts: upstream reported failure"},
		{"401 is not retried", apitest.StatusFault(401, "unauthorized"), nil, 1, "HTTP 401"},
		{"404 is not retried", apitest.StatusFault(404, "not found"), nil, 1, "HTTP 404"},
		{"no retries configured", apitest.StatusFault(503, "x"), func(c *apiclient.Config) { c.MaxRetries = 0 }, 1, "HTTP 503"},
		{"too large is not retried", apitest.StatusFault(200, `{"code":1,"success":true,"msg":"`+strings.Repeat("x", 100)+`","data":{}}`),
			func(c *apiclient.Config) { c.MaxResponseBytes = 50 }, 1, "exceeds the size limit of 50 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, apitest.WithFault("p.eth", tt.fault), apitest.WithProjects(project))
			log := &retryLog{}
			mod := retrying(log)
			c := newClient(t, srv, func(c *apiclient.Config) {
				mod(c)
				if tt.mod != nil {
					tt.mod(c)
				}
			})
			_, err := c.ProjectDetails(context.Background(), "p.eth")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), `project details of nft "p.eth"`) {
				t.Errorf("error does not name the nft: %v", err)
			}
			if n := srv.RequestCount(apiclient.DetailsPath); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	srv := newServer(t, apitest.WithFault("p.eth", apitest.FailFirst(1, apitest.RateLimited("1"))),
		apitest.WithProjects(apitest.Project{ID: 7, NFT: "p.eth"}))
	log := &retryLog{}
	c := newClient(t, srv, retrying(log))
	if _, err := c.ProjectDetails(context.Background(), "p.eth"); err != nil {
		t.Fatal(err)
	}
	// The exponential wait would be about a millisecond; the server asked for a second.
	if len(log.waits) != 1 || log.waits[0] != 1000 {
		t.Fatalf("waits %v ms, want [1000]", log.waits)
	}
}

func TestRetryAfterPastTheDeadlineFailsAtOnce(t *testing.T) {
	srv := newServer(t, apitest.WithFault("p.eth", apitest.RateLimited("120")),
		apitest.WithProjects(apitest.Project{ID: 7, NFT: "p.eth"}))
	c := newClient(t, srv, retrying(&retryLog{}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.ProjectDetails(ctx, "p.eth")
	if err == nil || !strings.Contains(err.Error(), "HTTP 429") || !strings.Contains(err.Error(), "past this pass's deadline") {
		t.Fatalf("error %v, want a 429 that names the deadline", err)
	}
	if ctx.Err() != nil {
		t.Error("the client waited for the deadline instead of giving up")
	}
	if n := srv.RequestCount(apiclient.DetailsPath); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestCancelledWhileWaitingNamesTheLastFailure(t *testing.T) {
	srv := newServer(t, apitest.WithFault("p.eth", apitest.StatusFault(503, "down")),
		apitest.WithProjects(apitest.Project{ID: 7, NFT: "p.eth"}))
	c := newClient(t, srv, func(c *apiclient.Config) {
		c.MaxRetries = 4
		c.RetryBackoff = time.Hour
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.ProjectDetails(ctx, "p.eth")
	if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") || !strings.Contains(err.Error(), "last attempt: HTTP 503") {
		t.Fatalf("error %v, want the deadline and the last 503", err)
	}
}

func TestCallbackErrorsAreNotRetried(t *testing.T) {
	srv := newServer(t, apitest.WithProjects(apitest.Project{ID: 7, NFT: "p.eth", Messages: []apitest.Message{{ID: 1}}}))
	c := newClient(t, srv, retrying(&retryLog{}))
	err := c.ListMessages(context.Background(), 7, func(apiclient.Message) error { return errSpoolFull }, nil)
	if err == nil || !strings.Contains(err.Error(), "messages of project 7: spool full") {
		t.Fatalf("error %v, want the callback's error", err)
	}
	if n := srv.RequestCount(apiclient.ListPath); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

type constError string

func (e constError) Error() string { return string(e) }

const errSpoolFull = constError("spool full")

func TestRateLimitSpacesRequests(t *testing.T) {
	srv := newServer(t, apitest.WithProjects(apitest.Project{ID: 7, NFT: "p.eth"}))
	c := newClient(t, srv, func(c *apiclient.Config) { c.RateLimit = 1 })
	// At one request a second, the third request would start two seconds
	// in, past this deadline: the limiter refuses it rather than sending.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var err error
	for range 3 {
		if _, err = c.ProjectDetails(ctx, "p.eth"); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "waiting for the request rate limit") {
		t.Fatalf("error %v, want the rate limit to refuse the third request", err)
	}
	if n := srv.RequestCount(apiclient.DetailsPath); n != 2 {
		t.Errorf("%d requests reached the server, want 2", n)
	}
}

func TestOutcomesAreObserved(t *testing.T) {
	project := apitest.Project{ID: 7, NFT: "p.eth", Messages: []apitest.Message{{ID: 1}}}
	tests := []struct {
		fault apitest.Fault
		want  string
	}{
		{apitest.Fault{}, "ok"},
		{apitest.StatusFault(502, "<html/>"), "http_5xx"},
		{apitest.RateLimited("0"), "http_429"},
		{apitest.StatusFault(404, "no"), "http_4xx"},
		{apitest.FailureEnvelope(), "envelope"},
		{apitest.InvalidJSON(), "invalid_body"},
		{apitest.Truncated(20), "invalid_body"},
		{apitest.Slow(2 * time.Second), "timeout"},
		{apitest.ConnReset(), "network"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			srv := newServer(t, apitest.WithProjects(project), apitest.WithFault("p.eth", tt.fault))
			var got []string
			c := newClient(t, srv, func(c *apiclient.Config) {
				retrying(&retryLog{})(c)
				c.MaxRetries = 0
				c.Observe = func(op, outcome string, d time.Duration) { got = append(got, op+" "+outcome) }
			})
			_, _ = c.ProjectDetails(context.Background(), "p.eth")
			if len(got) != 1 || got[0] != "project_details "+tt.want {
				t.Errorf("observed %q, want [project_details %s]", got, tt.want)
			}
		})
	}
}
