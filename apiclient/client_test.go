package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
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
		// unavailable: the failure says the upstream as a whole did not answer.
		unavailable bool
	}{
		{name: "5xx with html", fault: ptr(apitest.StatusFault(502, "<html><body>\n<h1>Bad Gateway</h1></body></html>")), want: "HTTP 502 Bad Gateway: <html><body> <h1>Bad Gateway</h1></body></html>", wantErr: new(*apiclient.StatusError), unavailable: true},
		{name: "429", fault: ptr(apitest.RateLimited("7")), want: "HTTP 429 Too Many Requests", wantErr: new(*apiclient.StatusError), unavailable: true},
		{name: "failure envelope", fault: ptr(apitest.FailureEnvelope()), want: `upstream reported failure (code 0, success false, msg "Process failed")`, wantErr: new(*apiclient.EnvelopeError)},
		{name: "failure envelope on list", fault: ptr(apitest.FailureEnvelope()), list: true, want: "messages of project 7: upstream reported failure", wantErr: new(*apiclient.EnvelopeError)},
		{name: "invalid json", fault: ptr(apitest.InvalidJSON()), want: "invalid JSON"},
		{name: "truncated list", fault: ptr(apitest.Truncated(30)), list: true, want: "unexpected EOF"},
		{name: "slow", fault: ptr(apitest.Slow(5 * time.Second)), mod: func(c *apiclient.Config) { c.RequestTimeout = 200 * time.Millisecond },
			want: "no complete response within the request timeout of 200ms", unavailable: true},
		{name: "too large", list: true, mod: func(c *apiclient.Config) { c.MaxResponseBytes = 40 }, want: "response body exceeds the size limit of 40 bytes"},
		{name: "reset", fault: ptr(apitest.ConnReset()), mod: func(c *apiclient.Config) {
			c.HTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		}, want: `project details of nft "p.eth": read tcp `, unavailable: true},
		{name: "refused", mod: func(c *apiclient.Config) { c.BaseURL = closedURL(t) }, want: `project details of nft "p.eth": dial tcp `, unavailable: true},
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
			if got := apiclient.Unavailable(err); got != tt.unavailable {
				t.Errorf("Unavailable(%v) = %t, want %t", err, got, tt.unavailable)
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

// A 401 or 403 says what to check, in the caller's words when it gives
// them, and never quotes the secret.
func TestRefusedCredentialsSayWhatToCheck(t *testing.T) {
	tests := []struct {
		name   string
		secret string
		fault  apitest.Fault
		hint   string
		want   string
	}{
		{name: "401", secret: "wrong-secret-value",
			want: `project details of nft "p.eth": HTTP 401 Unauthorized: {"code":0,"data":{},"msg":"Process failed","success":false}; check the client id and secret`},
		{name: "401 with the caller's hint", secret: "wrong-secret-value", hint: "check READSYNC_CLIENT_ID and READSYNC_CLIENT_SECRET",
			want: `project details of nft "p.eth": HTTP 401 Unauthorized: {"code":0,"data":{},"msg":"Process failed","success":false}; check READSYNC_CLIENT_ID and READSYNC_CLIENT_SECRET`},
		{name: "403", secret: secret, fault: apitest.StatusFault(403, "forbidden"), hint: "check READSYNC_CLIENT_ID and READSYNC_CLIENT_SECRET",
			want: `project details of nft "p.eth": HTTP 403 Forbidden: forbidden; check READSYNC_CLIENT_ID and READSYNC_CLIENT_SECRET`},
		{name: "404 has no hint", secret: secret, fault: apitest.StatusFault(404, "no"), hint: "check READSYNC_CLIENT_ID and READSYNC_CLIENT_SECRET",
			want: `project details of nft "p.eth": HTTP 404 Not Found: no`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth"}), apitest.WithFault("p.eth", tt.fault))
			c := newClient(t, srv, func(c *apiclient.Config) { c.ClientSecret, c.CredentialsHint = tt.secret, tt.hint })
			_, err := c.ProjectDetails(context.Background(), "p.eth")
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error\n %v\nwant\n %s", err, tt.want)
			}
		})
	}
}

// The credentials go to the base URL's origin only: a redirect to another
// port is refused before anything is sent there, and is not retried.
func TestRedirectsToAnotherOriginAreRefused(t *testing.T) {
	other := newServer(t, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth"}))
	var redirects atomic.Int32
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirects.Add(1)
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	t.Cleanup(redirector.Close)
	c, err := apiclient.New(apiclient.Config{BaseURL: redirector.URL, ClientID: "1001", ClientSecret: secret, MaxRetries: 3, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ProjectDetails(context.Background(), "p.eth")
	want := `project details of nft "p.eth": redirect to another origin refused: the client credentials are sent only to ` +
		redirector.URL + ", and " + apiclient.DetailsPath + " redirected to " + other.URL
	if err == nil || err.Error() != want {
		t.Fatalf("error\n %v\nwant\n %s", err, want)
	}
	if reqs := other.Requests(); len(reqs) != 0 {
		t.Errorf("the other origin saw %d requests (credentials %q/%q)", len(reqs), reqs[0].Header.Get("client_id"), reqs[0].Header.Get("client_secret"))
	}
	if n := redirects.Load(); n != 1 {
		t.Errorf("%d requests to the redirecting server, want 1 (no retry)", n)
	}
}

// A redirect within the origin keeps the credentials: the API moving a
// path on its own host is no reason to fail.
func TestRedirectsWithinTheOriginAreFollowed(t *testing.T) {
	upstream := newServer(t, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth"}))
	target, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if moved, ok := strings.CutPrefix(r.URL.Path, "/moved"); ok {
			r.URL.Path = moved
			proxy.ServeHTTP(w, r)
			return
		}
		u := *r.URL
		u.Path = "/moved" + u.Path
		http.Redirect(w, r, u.RequestURI(), http.StatusMovedPermanently)
	}))
	t.Cleanup(srv.Close)
	c, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: "1001", ClientSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := c.ProjectDetails(context.Background(), "p.eth"); err != nil || p.ID != 1 {
		t.Fatalf("got project %d, %v; want project 1 through the redirect", p.ID, err)
	}
}

// closedURL is the base URL of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

// A failure envelope in answer to project details says what it most likely
// means; the same envelope for a list, whose project was just found, does
// not.
func TestUnknownNameSaysSo(t *testing.T) {
	srv := newServer(t, apitest.WithProjects(apitest.Project{ID: 7, NFT: "p.eth"}), apitest.WithListFault(7, apitest.FailureEnvelope()))
	c := newClient(t, srv, func(c *apiclient.Config) { c.MaxRetries = 4; c.RetryBackoff = time.Millisecond })
	_, err := c.ProjectDetails(context.Background(), "nobody.eth")
	want := `project details of nft "nobody.eth": after 2 attempts: upstream reported failure (code 0, success false, msg "Process failed"); ` +
		`the nft name may not be registered: the API answers so for a name it does not know, and gives no other sign`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n %v\nwant\n %s", err, want)
	}
	if !errors.Is(err, apiclient.ErrNotRegistered) || apiclient.Unavailable(err) {
		t.Errorf("errors.Is(err, ErrNotRegistered) = %t, Unavailable = %t; want true, false",
			errors.Is(err, apiclient.ErrNotRegistered), apiclient.Unavailable(err))
	}
	err = c.ListMessages(context.Background(), 7, func(apiclient.Message) error { return nil }, nil)
	if err == nil || errors.Is(err, apiclient.ErrNotRegistered) {
		t.Errorf("list failure %v: want an error that does not blame the name", err)
	}
}

// A base URL is a scheme and a host: each other part is refused with a
// message that says which, and what is wanted.
func TestParseBaseURL(t *testing.T) {
	const form = ": want scheme and host only, such as https://api.example.com"
	tests := []struct{ in, want string }{
		{"https://api.example.com", "https://api.example.com"},
		{"https://api.example.com/", "https://api.example.com"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"https://host/platform/api/v1", `it has the path "/platform/api/v1"; the API's paths (/platform/api/v1/…) are added to it` + form},
		{"https://host/api/", `it has the path "/api/"; the API's paths (/platform/api/v1/…) are added to it` + form},
		{"https://host?debug=1", `it has the query "debug=1"` + form},
		{"https://host/?", `it has the query ""` + form},
		{"https://host#top", `it has the fragment "top"` + form},
		{"https://user:pw@host", `it has user info; the API's credentials are the client id and secret` + form},
		{"api.example.com", `the scheme is "", not http or https` + form},
		{"ftp://host", `the scheme is "ftp", not http or https` + form},
		{"https://", `it has no host` + form},
		{"http://[::1", `missing ']' in host` + form},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			u, err := apiclient.ParseBaseURL(tt.in)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = u.String()
			}
			if got != tt.want {
				t.Errorf("ParseBaseURL(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
	_, err := apiclient.New(apiclient.Config{BaseURL: "https://user:pw@host/x", ClientID: "1", ClientSecret: "s"})
	if err == nil || strings.Contains(err.Error(), "pw") || !strings.HasPrefix(err.Error(), `base URL "https://user:xxxxx@host/x": `) {
		t.Errorf("New with user info: %v; want the URL quoted without its password", err)
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
