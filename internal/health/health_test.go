package health_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readsync/readsync/internal/health"
)

// The probes through a daemon's life: live throughout; ready only once
// the daemon says so and until shutdown begins, with the reason otherwise.
func TestProbes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "readsync_test_total", Help: "A test's."}))
	var p health.Probes
	srv := health.Serve(ln, &p, reg, slog.New(slog.DiscardHandler))
	t.Cleanup(srv.Stop)
	base := "http://" + ln.Addr().String()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	expect := func(when, path string, code int, body string) {
		t.Helper()
		if got, b := get(path); got != code || !strings.Contains(b, body) {
			t.Errorf("%s: %s = %d %q, want %d containing %q", when, path, got, b, code, body)
		}
	}
	expect("starting", "/healthz", 200, "ok")
	expect("starting", "/readyz", 503, "starting")
	p.SetReady(func(context.Context) error { return errors.New("ClickHouse does not answer") })
	expect("not ready", "/readyz", 503, "ClickHouse does not answer")
	p.SetReady(func(context.Context) error { return nil })
	expect("ready", "/readyz", 200, "ready")
	expect("ready", "/metrics", 200, "readsync_test_total 0")
	p.Stopping()
	expect("stopping", "/healthz", 200, "ok")
	expect("stopping", "/readyz", 503, "shutting down")
}

// Stop returns once the listener no longer answers.
func TestStopWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := health.Serve(ln, &health.Probes{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	srv.Stop()
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Error("the listener answers after Stop")
	}
}
