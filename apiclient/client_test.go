package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/apiclient/apitest"
)

const secret = "the-client-secret"

func newClient(t *testing.T, srv *apitest.Server, mod func(*apiclient.Config)) *apiclient.Client {
	t.Helper()
	cfg := apiclient.Config{BaseURL: srv.URL, ClientID: "1001", ClientSecret: secret, RequestTimeout: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	c, err := apiclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newServer(t *testing.T, opts ...apitest.Option) *apitest.Server {
	t.Helper()
	srv := apitest.NewServer(append([]apitest.Option{apitest.WithCredentials("1001", secret)}, opts...)...)
	t.Cleanup(srv.Close)
	return srv
}

func TestRequestsCarryHeadersAndExactNames(t *testing.T) {
	names := []string{"a&b=c+d%e f.eth", "café-☕.eth", "plain.dmail", "100%+?#/.eth"}
	var projects []apitest.Project
	for i, n := range names {
		projects = append(projects, apitest.Project{ID: int64(i + 1), NFT: n, CreateAt: "2026-01-01 00:00:00",
			Messages: []apitest.Message{{ID: 1, Percent: "0.00%"}}})
	}
	srv := newServer(t, apitest.WithProjects(projects...))
	c := newClient(t, srv, nil)
	ctx := context.Background()
	for i, n := range names {
		p, err := c.ProjectDetails(ctx, n)
		if err != nil {
			t.Fatalf("%q: %v", n, err)
		}
		if p.ID != int64(i+1) || p.NFT != n {
			t.Errorf("%q: got project %d %q", n, p.ID, p.NFT)
		}
		if err := c.ListMessages(ctx, p.ID, func(apiclient.Message) error { return nil }, nil); err != nil {
			t.Fatalf("%q: list: %v", n, err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2*len(names) {
		t.Fatalf("server saw %d requests, want %d", len(reqs), 2*len(names))
	}
	for i, r := range reqs {
		if r.Method != http.MethodGet {
			t.Errorf("request %d: method %s", i, r.Method)
		}
		if r.Header.Get("client_id") != "1001" || r.Header.Get("client_secret") != secret {
			t.Errorf("request %d: credentials %q/%q", i, r.Header.Get("client_id"), r.Header.Get("client_secret"))
		}
		isList := r.Path == apiclient.ListPath
		if ct := r.Header.Get("Content-Type"); isList != (ct == "application/json") {
			t.Errorf("request %d to %s: Content-Type %q", i, r.Path, ct)
		}
		if !isList && r.Query.Get("nft_name") != names[i/2] {
			t.Errorf("request %d: nft_name arrived as %q, want %q (raw %q)", i, r.Query.Get("nft_name"), names[i/2], r.RawQuery)
		}
	}
}

func TestFailuresNameTheirCause(t *testing.T) {
	project := apitest.Project{ID: 7, NFT: "p.eth", CreateAt: "2026-01-01 00:00:00", Messages: []apitest.Message{{ID: 1}}}
	tests := []struct {
		name    string
		fault   *apitest.Fault
		list    bool
		mod     func(*apiclient.Config)
		want    string
		wantErr any
	}{
		{name: "5xx with html", fault: ptr(apitest.StatusFault(502, "<html><body>\n<h1>Bad Gateway</h1></body></html>")), want: "HTTP 502 Bad Gateway: <html><body> <h1>Bad Gateway</h1></body></html>", wantErr: new(*apiclient.StatusError)},
		{name: "429", fault: ptr(apitest.RateLimited("7")), want: "HTTP 429 Too Many Requests", wantErr: new(*apiclient.StatusError)},
		{name: "failure envelope", fault: ptr(apitest.FailureEnvelope()), want: `upstream reported failure (code 0, success false, msg "Process failed")`, wantErr: new(*apiclient.EnvelopeError)},
		{name: "failure envelope on list", fault: ptr(apitest.FailureEnvelope()), list: true, want: "messages of project 7: upstream reported failure", wantErr: new(*apiclient.EnvelopeError)},
		{name: "invalid json", fault: ptr(apitest.InvalidJSON()), want: "invalid JSON"},
		{name: "truncated list", fault: ptr(apitest.Truncated(30)), list: true, want: "unexpected EOF"},
		{name: "slow", fault: ptr(apitest.Slow(5 * time.Second)), mod: func(c *apiclient.Config) { c.RequestTimeout = 200 * time.Millisecond },
			want: "no complete response within the request timeout of 200ms"},
		{name: "too large", list: true, mod: func(c *apiclient.Config) { c.MaxResponseBytes = 40 }, want: "response body exceeds the size limit of 40 bytes"},
		{name: "reset", fault: ptr(apitest.ConnReset()), mod: func(c *apiclient.Config) {
			c.HTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		}, want: "GET /platform/api/v1/projects/externalDetail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []apitest.Option
			switch {
			case tt.list && tt.fault != nil:
				opts = append(opts, apitest.WithListFault(7, *tt.fault))
			case tt.fault != nil:
				opts = append(opts, apitest.WithFault("p.eth", *tt.fault))
			}
			srv := newServer(t, append(opts, apitest.WithProjects(project))...)
			c := newClient(t, srv, tt.mod)
			var err error
			if tt.list {
				err = c.ListMessages(context.Background(), 7, func(apiclient.Message) error { return nil }, nil)
			} else {
				_, err = c.ProjectDetails(context.Background(), "p.eth")
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if !tt.list && !strings.Contains(err.Error(), `nft "p.eth"`) {
				t.Errorf("error does not name the nft: %v", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error leaks the secret: %v", err)
			}
			if tt.wantErr != nil && !errors.As(err, tt.wantErr) {
				t.Errorf("error %v is not a %T", err, tt.wantErr)
			}
		})
	}
}

func TestStatusErrorKeepsRetryAfter(t *testing.T) {
	srv := newServer(t, apitest.WithFault("p.eth", apitest.RateLimited("7")))
	_, err := newClient(t, srv, nil).ProjectDetails(context.Background(), "p.eth")
	var se *apiclient.StatusError
	if !errors.As(err, &se) || se.StatusCode != 429 || se.RetryAfter != "7" {
		t.Fatalf("got %v, want a 429 StatusError with Retry-After 7", err)
	}
}

func TestWrongCredentials(t *testing.T) {
	srv := newServer(t, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth"}))
	c := newClient(t, srv, func(c *apiclient.Config) { c.ClientSecret = "wrong-secret-value" })
	_, err := c.ProjectDetails(context.Background(), "p.eth")
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Fatalf("error %v: want HTTP 401 without the secret", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []apiclient.Config{
		{BaseURL: "", ClientID: "1", ClientSecret: "s"},
		{BaseURL: "ftp://x", ClientID: "1", ClientSecret: "s"},
		{BaseURL: "http://x?y=1", ClientID: "1", ClientSecret: "s"},
		{BaseURL: "http://x", ClientID: "", ClientSecret: "s"},
		{BaseURL: "http://x", ClientID: "1", ClientSecret: ""},
	} {
		if _, err := apiclient.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func ptr[T any](v T) *T { return &v }
