package apitest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestFaultResponses(t *testing.T) {
	const html = "<html><body><h1>502 Bad Gateway</h1></body></html>"
	tests := []struct {
		name        string
		fault       Fault
		wantStatus  int
		wantType    string
		wantHeader  [2]string
		wantBody    string
		invalidJSON bool
	}{
		{"html 500", StatusFault(500, html), 500, "text/html; charset=utf-8", [2]string{}, html, false},
		{"json 503", StatusFault(503, `{"error":"busy"}`), 503, contentTypeJSON, [2]string{}, `{"error":"busy"}`, false},
		{"rate limited", RateLimited("2"), 429, "text/plain; charset=utf-8", [2]string{"Retry-After", "2"}, "Too Many Requests\n", false},
		{"failure envelope", FailureEnvelope(), 200, contentTypeJSON, [2]string{}, failureBody, false},
		{"invalid json", InvalidJSON(), 200, contentTypeJSON, [2]string{}, "", true},
		{"extra header", StatusFault(500, "x").WithHeader("X-Upstream", "down"), 500, "text/plain; charset=utf-8", [2]string{"X-Upstream", "down"}, "x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fixtureProject()
			s := startServer(t, WithProjects(p), WithFault(p.NFT, tt.fault), WithListFault(p.ID, tt.fault))
			for _, u := range []string{detailURL(s, p.NFT), listURL(s, p.ID)} {
				res, body := get(t, s, u)
				if res.StatusCode != tt.wantStatus {
					t.Errorf("%s: status = %d, want %d", u, res.StatusCode, tt.wantStatus)
				}
				if ct := res.Header.Get("Content-Type"); ct != tt.wantType {
					t.Errorf("%s: Content-Type = %q, want %q", u, ct, tt.wantType)
				}
				if k := tt.wantHeader[0]; k != "" && res.Header.Get(k) != tt.wantHeader[1] {
					t.Errorf("%s: %s = %q, want %q", u, k, res.Header.Get(k), tt.wantHeader[1])
				}
				if tt.invalidJSON {
					if json.Valid([]byte(body)) {
						t.Errorf("%s: body is valid JSON: %s", u, body)
					}
				} else if body != tt.wantBody {
					t.Errorf("%s: body = %q, want %q", u, body, tt.wantBody)
				}
			}
		})
	}
}

func TestFaultMatchesOnlyItsKey(t *testing.T) {
	p, other := fixtureProject(), Project{ID: 8, NFT: "b.dmail"}
	s := startServer(t, WithProjects(p, other),
		WithFault(p.NFT, StatusFault(500, "x")), WithListFault(p.ID, StatusFault(500, "x")))
	if res, _ := get(t, s, detailURL(s, other.NFT)); res.StatusCode != 200 {
		t.Errorf("details of another project: status %d", res.StatusCode)
	}
	if res, _ := get(t, s, listURL(s, other.ID)); res.StatusCode != 200 {
		t.Errorf("list of another project: status %d", res.StatusCode)
	}
	// The detail fault is keyed by name and the list fault by id, so they
	// do not leak into each other's operation for a different key.
	s.SetFault(p.NFT, Fault{})
	if res, body := get(t, s, detailURL(s, p.NFT)); res.StatusCode != 200 || body != fixtureDetailBody {
		t.Errorf("zero Fault did not clear: %d %s", res.StatusCode, body)
	}
	if res, _ := get(t, s, listURL(s, p.ID)); res.StatusCode != 500 {
		t.Errorf("list fault lost: status %d", res.StatusCode)
	}
}

func TestFaultForUnknownProject(t *testing.T) {
	s := startServer(t, WithFault("ghost.dmail", StatusFault(502, "bad gateway")), WithListFault(404, StatusFault(502, "")))
	if res, _ := get(t, s, detailURL(s, "ghost.dmail")); res.StatusCode != 502 {
		t.Errorf("details: status %d, want 502", res.StatusCode)
	}
	if res, _ := get(t, s, listURL(s, 404)); res.StatusCode != 502 {
		t.Errorf("list: status %d, want 502", res.StatusCode)
	}
}

func TestFaultWithHeaderCopies(t *testing.T) {
	base := RateLimited("1")
	_ = base.WithHeader("Retry-After", "99")
	s := startServer(t, WithFault("x", base))
	if res, _ := get(t, s, detailURL(s, "x")); res.Header.Get("Retry-After") != "1" {
		t.Errorf("WithHeader modified its receiver: Retry-After = %q", res.Header.Get("Retry-After"))
	}
}

func TestTruncated(t *testing.T) {
	p := fixtureProject()
	tests := []struct {
		name string
		cut  int
		want func(full string) string
	}{
		{"first 10 bytes", 10, func(full string) string { return full[:10] }},
		{"default half", 0, func(full string) string { return full[:len(full)/2] }},
		{"too long means half", 1 << 20, func(full string) string { return full[:len(full)/2] }},
	}
	for _, tt := range tests {
		for _, op := range []struct {
			name, full string
			opt        Option
			url        func(*Server) string
		}{
			{"details", fixtureDetailBody, WithFault(p.NFT, Truncated(tt.cut)), func(s *Server) string { return detailURL(s, p.NFT) }},
			{"list", fixtureListBody, WithListFault(p.ID, Truncated(tt.cut)), func(s *Server) string { return listURL(s, p.ID) }},
		} {
			t.Run(tt.name+" "+op.name, func(t *testing.T) {
				s := startServer(t, WithProjects(p), op.opt)
				u := op.url(s)
				res, body, err := do(t, t.Context(), newClient(t), http.MethodGet, u, authed(u))
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("err = %v, want unexpected EOF", err)
				}
				if res.StatusCode != 200 || res.Header.Get("Content-Type") != contentTypeJSON {
					t.Errorf("status %d Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
				}
				if res.ContentLength != int64(len(op.full)) {
					t.Errorf("ContentLength = %d, want %d", res.ContentLength, len(op.full))
				}
				if want := tt.want(op.full); string(body) != want {
					t.Errorf("body = %q, want %q", body, want)
				}
			})
		}
	}
}

func TestConnReset(t *testing.T) {
	p := fixtureProject()
	s := startServer(t, WithProjects(p), WithFault(p.NFT, ConnReset()), WithListFault(p.ID, ConnReset()))
	for _, u := range []string{detailURL(s, p.NFT), listURL(s, p.ID)} {
		res, _, err := do(t, t.Context(), newClient(t), http.MethodGet, u, authed(u))
		if err == nil {
			t.Errorf("%s: got status %d, want a transport error", u, res.StatusCode)
		} else if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: err = %v, want connection reset", u, err)
		}
	}
}

func TestSlow(t *testing.T) {
	p := fixtureProject()
	const d = 300 * time.Millisecond
	s := startServer(t, WithProjects(p), WithFault(p.NFT, Slow(d)))

	t.Run("client gives up", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := do(t, ctx, newClient(t), http.MethodGet, detailURL(s, p.NFT), authed(""))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want deadline exceeded", err)
		}
		if elapsed := time.Since(start); elapsed >= d {
			t.Errorf("client waited %v", elapsed)
		}
	})
	t.Run("patient client", func(t *testing.T) {
		start := time.Now()
		res, body := get(t, s, detailURL(s, p.NFT))
		if elapsed := time.Since(start); elapsed < d {
			t.Errorf("answered after %v, want at least %v", elapsed, d)
		}
		if res.StatusCode != 200 || body != fixtureDetailBody {
			t.Errorf("status %d body %s", res.StatusCode, body)
		}
	})
}

func TestFailFirst(t *testing.T) {
	p := fixtureProject()
	s := startServer(t, WithProjects(p), WithListFault(p.ID, FailFirst(2, StatusFault(503, "busy"))))
	var got []int
	for range 4 {
		res, _ := get(t, s, listURL(s, p.ID))
		got = append(got, res.StatusCode)
	}
	if want := []int{503, 503, 200, 200}; !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}

	// Registering again restarts the count.
	s.SetListFault(p.ID, FailFirst(1, ConnReset()))
	if _, _, err := do(t, t.Context(), newClient(t), http.MethodGet, listURL(s, p.ID), authed(listURL(s, p.ID))); err == nil {
		t.Error("first request after re-registering succeeded")
	}
	if res, body := get(t, s, listURL(s, p.ID)); res.StatusCode != 200 || body != fixtureListBody {
		t.Errorf("second request: %d %s", res.StatusCode, body)
	}

	if f := FailFirst(0, StatusFault(500, "")); f.kind != faultNone {
		t.Error("FailFirst(0, f) should never fire")
	}
}

func TestFailFirstConcurrent(t *testing.T) {
	const n, limit = 40, 7
	p := fixtureProject()
	s := startServer(t, WithProjects(p), WithFault(p.NFT, FailFirst(limit, FailureEnvelope())))
	client := newClient(t)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures int
	)
	for range n {
		wg.Go(func() {
			u := detailURL(s, p.NFT)
			_, body, err := do(t, t.Context(), client, http.MethodGet, u, authed(u))
			if err != nil {
				t.Error(err)
				return
			}
			if strings.Contains(string(body), `"success":false`) {
				mu.Lock()
				failures++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failures != limit {
		t.Errorf("%d failures, want %d", failures, limit)
	}
}
