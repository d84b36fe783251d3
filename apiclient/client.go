// Package apiclient is a typed client for the two read operations of the
// messaging platform's API: project details by nft name, and the list of
// messages a project sent. It knows HTTP and the response envelope and
// nothing about where the data goes.
package apiclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Paths of the two operations, relative to the base URL, and the root
// they share.
const (
	APIRoot     = "/platform/api/v1"
	DetailsPath = APIRoot + "/projects/externalDetail"
	ListPath    = APIRoot + "/messages/list"
)

// DefaultMaxResponseBytes bounds a response body when Config leaves it zero.
const DefaultMaxResponseBytes = 256 << 20

// Config describes how to reach the API. BaseURL, ClientID and ClientSecret
// are required.
type Config struct {
	// BaseURL is the scheme and host of the API, e.g. "https://api.example.com".
	BaseURL string
	// ClientID and ClientSecret are sent as the client_id and client_secret
	// headers on every request.
	ClientID     string
	ClientSecret string
	// HTTPClient is shared by all requests; nil means a client from
	// NewHTTPClient(8). The caller owns it and should reuse one per process.
	// Its transport is used as is; its redirect policy is narrowed to the
	// base URL's origin (see New).
	HTTPClient *http.Client
	// RequestTimeout bounds one request including reading its body; zero
	// means 30s.
	RequestTimeout time.Duration
	// MaxResponseBytes bounds one response body; zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// UserAgent is sent as the User-Agent header when not empty.
	UserAgent string
	// MaxRetries is how many times a transiently failed request is tried
	// again; zero means never.
	MaxRetries int
	// RetryBackoff is the wait before the first retry; it doubles, with
	// jitter, up to 30s. Zero means DefaultRetryBackoff.
	RetryBackoff time.Duration
	// RateLimit bounds requests per second across every caller of the
	// Client, retries included; zero means no limit.
	RateLimit float64
	// Logger receives a warning for every retry; nil discards them.
	Logger *slog.Logger
	// CredentialsHint is appended to the error of a 401 or 403 response,
	// to say where the client id and secret come from, e.g. "check
	// READSYNC_CLIENT_ID and READSYNC_CLIENT_SECRET". Empty means "check the
	// client id and secret".
	CredentialsHint string
	// Observe, when set, is called after every attempt of a request with
	// the operation ("project_details" or "list_messages"), its outcome
	// (ok, http_4xx, http_429, http_5xx, envelope, timeout, too_large,
	// invalid_body, canceled or network) and its duration, e.g. to feed
	// metrics.
	Observe func(op, outcome string, d time.Duration)
}

// Client performs the API's operations. It is safe for concurrent use.
type Client struct {
	base     *url.URL
	id       string
	secret   string
	http     *http.Client
	timeout  time.Duration
	maxBytes int64
	ua       string
	authHint string

	maxRetries int
	backoff    time.Duration
	limiter    *rate.Limiter // nil when unlimited
	log        *slog.Logger
	observe    func(op, outcome string, d time.Duration)
}

// New validates cfg and returns a Client.
//
// The client id and secret go to the base URL's origin (scheme, host and
// port) and nowhere else: net/http forwards custom headers such as
// client_secret on every redirect, so a redirect to another origin is
// refused and fails the request without a retry. A redirect within the
// origin is followed, credentials included, up to 10 times.
func New(cfg Config) (*Client, error) {
	base, err := ParseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL %q: %w", redactURL(cfg.BaseURL), err)
	}
	if cfg.ClientID == "" {
		return nil, errors.New("client id is empty")
	}
	if cfg.ClientSecret == "" {
		return nil, errors.New("client secret is empty")
	}
	c := &Client{
		base:     base,
		id:       cfg.ClientID,
		secret:   cfg.ClientSecret,
		http:     cfg.HTTPClient,
		timeout:  cfg.RequestTimeout,
		maxBytes: cfg.MaxResponseBytes,
		ua:       cfg.UserAgent,
		authHint: cfg.CredentialsHint,

		maxRetries: max(cfg.MaxRetries, 0),
		backoff:    cfg.RetryBackoff,
		log:        cfg.Logger,
		observe:    cfg.Observe,
	}
	if cfg.RateLimit > 0 {
		// A burst of one spaces requests evenly: the limit holds over any
		// window, not just on average.
		c.limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit), 1)
	}
	if c.backoff <= 0 {
		c.backoff = DefaultRetryBackoff
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.http == nil {
		c.http = NewHTTPClient(8)
	}
	// A copy shares the caller's transport and connection pool; only the
	// redirect policy differs.
	hc := *c.http
	hc.CheckRedirect = sameOriginRedirects(base, hc.CheckRedirect)
	c.http = &hc
	if c.authHint == "" {
		c.authHint = "check the client id and secret"
	}
	if c.timeout <= 0 {
		c.timeout = 30 * time.Second
	}
	if c.maxBytes <= 0 {
		c.maxBytes = DefaultMaxResponseBytes
	}
	return c, nil
}

// ExampleBaseURL is the form ParseBaseURL wants, for messages that show it.
const ExampleBaseURL = "https://api.example.com"

// ParseBaseURL checks that s is an absolute http or https URL of a scheme
// and a host (and port) only, and returns it without a trailing slash. A
// path is refused rather than kept: the operations' paths, with their
// version, are added to it, so a base URL that copies them from the spec
// (https://host/platform/api/v1) would make every request a 404.
// Errors do not quote s, which the caller names; they say what is wrong and
// end with the form wanted.
func ParseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats s
		}
		return nil, baseURLError(err.Error())
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, baseURLError(fmt.Sprintf("the scheme is %q, not http or https", u.Scheme))
	case u.Host == "":
		return nil, baseURLError("it has no host")
	case u.User != nil:
		// Not quoted: user info may hold a password.
		return nil, baseURLError("it has user info; the API's credentials are the client id and secret")
	case trimSlash(u.Path) != "":
		return nil, baseURLError(fmt.Sprintf("it has the path %q; the API's paths (%s/…) are added to it",
			u.Path, APIRoot))
	case u.RawQuery != "" || u.ForceQuery:
		return nil, baseURLError(fmt.Sprintf("it has the query %q", u.RawQuery))
	case u.Fragment != "":
		return nil, baseURLError(fmt.Sprintf("it has the fragment %q", u.Fragment))
	}
	u.Path, u.RawPath = "", ""
	return u, nil
}

// baseURLError is a base URL problem followed by the form wanted.
func baseURLError(problem string) error {
	return fmt.Errorf("%s: want scheme and host only, such as %s", problem, ExampleBaseURL)
}

// redactURL is s with any password in it replaced, for an error message.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}

func trimSlash(p string) string {
	for len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}

// NewHTTPClient returns an HTTP client whose connection pool keeps enough
// idle connections for concurrency requests in flight, so a pass reuses
// connections instead of dialling per request.
func NewHTTPClient(concurrency int) *http.Client {
	if concurrency < 1 {
		concurrency = 1
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 2 * concurrency
	t.MaxIdleConnsPerHost = 2 * concurrency
	t.IdleConnTimeout = 90 * time.Second
	t.ResponseHeaderTimeout = 0 // the per-request context bounds the whole exchange
	return &http.Client{Transport: t}
}

// ProjectDetails returns the project bound to the nft domain name nft,
// retrying transient failures.
func (c *Client) ProjectDetails(ctx context.Context, nft string) (Project, error) {
	var p Project
	u := c.url(DetailsPath, url.Values{"nft_name": {nft}})
	err := c.retry(ctx, "project_details", func() error {
		return c.get(ctx, u, false, func(body io.Reader) error {
			var err error
			p, err = decodeProject(body)
			return err
		})
	}, "nft", nft, "url", u)
	if err != nil {
		if errors.As(err, new(*EnvelopeError)) {
			err = fmt.Errorf("%w; %w", err, ErrNotRegistered)
		}
		return Project{}, fmt.Errorf("project details of nft %q: %w", nft, err)
	}
	return p, nil
}

// ListMessages streams the messages sent by the project projectID to fn, one
// at a time, as they are decoded, retrying transient failures.
//
// An attempt can fail after fn has seen messages: the body can break off,
// and the envelope that says whether the response succeeded can follow the
// list. Before a retry delivers the list again from its start, restart is
// called (when not nil) so the caller can drop what the failed attempt
// gave it. If ListMessages returns an error, the messages fn has seen since
// the last restart are unconfirmed. An error returned by fn ends the list
// without a retry and is returned wrapped.
func (c *Client) ListMessages(ctx context.Context, projectID int64, fn func(Message) error, restart func()) error {
	u := c.url(ListPath, url.Values{"project_id": {strconv.FormatInt(projectID, 10)}})
	delivered := false
	err := c.retry(ctx, "list_messages", func() error {
		if delivered && restart != nil {
			restart()
		}
		delivered = false
		return c.get(ctx, u, true, func(body io.Reader) error {
			return decodeList(body, func(m Message) error {
				delivered = true
				if err := fn(m); err != nil {
					return &callbackError{err}
				}
				return nil
			})
		})
	}, "project_id", projectID, "url", u)
	if err != nil {
		return fmt.Errorf("messages of project %d: %w", projectID, err)
	}
	return nil
}

// url is the address of the operation at path with the query q.
func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	return u.String()
}

// get sends one GET to u and hands a 2xx body to decode, bounded by the
// request timeout and the response size limit. Its errors do not repeat u.
func (c *Client) get(ctx context.Context, u string, jsonContentType bool, decode func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	// The spec spells these headers in lower case with underscores; setting
	// the map directly keeps them byte-exact instead of canonicalised.
	req.Header["client_id"] = []string{c.id}
	req.Header["client_secret"] = []string{c.secret}
	if jsonContentType {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.ua != "" {
		req.Header.Set("User-Agent", c.ua)
	}

	resp, err := c.http.Do(req)
	if err != nil {
		return c.timeoutErr(ctx, transportError{err})
	}
	defer func() {
		// Drain a little so the connection can be reused; a large unread
		// remainder is cheaper to drop with the connection.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := newStatusError(resp)
		if se.StatusCode == http.StatusUnauthorized || se.StatusCode == http.StatusForbidden {
			se.Hint = c.authHint
		}
		return se
	}
	body := &limitedReader{r: resp.Body, left: c.maxBytes, limit: c.maxBytes}
	if err := decode(body); err != nil {
		return c.timeoutErr(ctx, err)
	}
	return nil
}

// transportError is a failed exchange as net/http reports it, without the
// request's URL: the retry log line names the URL once, and the caller's
// error names the nft or project the request was for.
type transportError struct{ err error }

func (e transportError) Error() string {
	var ue *url.Error
	if errors.As(e.err, &ue) {
		return ue.Err.Error()
	}
	return e.err.Error()
}
func (e transportError) Unwrap() error { return e.err }

// errCrossOrigin marks a redirect refused because it leaves the base URL's
// origin; it is never retried.
var errCrossOrigin = errors.New("redirect to another origin refused")

// sameOriginRedirects returns a redirect policy that refuses to leave
// base's origin and otherwise defers to next (net/http's default of 10
// redirects when nil).
func sameOriginRedirects(base *url.URL, next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	allowed := origin(base)
	return func(req *http.Request, via []*http.Request) error {
		if to := origin(req.URL); to != allowed {
			return fmt.Errorf("%w: the client credentials are sent only to %s, and %s redirected to %s",
				errCrossOrigin, allowed, via[len(via)-1].URL.Path, to)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// origin is u's scheme, host and port, the port made explicit, in lower
// case: the unit a browser would trust with a credential.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// timeoutErr names the request timeout when it, rather than the caller's
// context, ended the request.
func (c *Client) timeoutErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no complete response within the request timeout of %s: %w", c.timeout, err)
	}
	return err
}

// ErrResponseTooLarge is returned when a body exceeds the configured limit.
var ErrResponseTooLarge = errors.New("response body exceeds the size limit")

type limitedReader struct {
	r     io.Reader
	left  int64
	limit int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One probe byte tells a body of exactly the limit from a larger one.
		var probe [1]byte
		n, err := l.r.Read(probe[:])
		if n > 0 {
			return 0, fmt.Errorf("%w of %d bytes", ErrResponseTooLarge, l.limit)
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
