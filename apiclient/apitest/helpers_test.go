package apitest

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
)

// startServer starts a Server that is closed when the test ends.
func startServer(t *testing.T, opts ...Option) *Server {
	t.Helper()
	s := NewServer(opts...)
	t.Cleanup(s.Close)
	return s
}

// newClient returns a client with its own transport. Keep-alives are off so
// that a reset connection is never retried transparently by the transport.
func newClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func detailURL(s *Server, nft string) string {
	return s.URL + DetailPath + "?" + url.Values{"nft_name": {nft}}.Encode()
}

func listURL(s *Server, id int64) string {
	return s.URL + ListPath + "?project_id=" + strconv.FormatInt(id, 10)
}

// authed returns the headers a correct client sends for rawURL.
func authed(rawURL string) http.Header {
	h := http.Header{}
	h.Set("client_id", DefaultClientID)
	h.Set("client_secret", DefaultClientSecret)
	if u, err := url.Parse(rawURL); err == nil && u.Path == ListPath {
		h.Set("Content-Type", "application/json")
	}
	return h
}

// do sends a request and returns the response with its body read fully.
func do(t *testing.T, ctx context.Context, c *http.Client, method, rawURL string, h http.Header) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header = h
	res, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, body, err
}

// get sends an authenticated GET and fails the test on any transport error.
func get(t *testing.T, s *Server, rawURL string) (*http.Response, string) {
	t.Helper()
	res, body, err := do(t, t.Context(), newClient(t), http.MethodGet, rawURL, authed(rawURL))
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	return res, string(body)
}
