// Package health serves a daemon's health endpoints and its metrics:
// /healthz (liveness), /readyz (readiness) and /metrics, on a listener of
// their own, with the pages the daemon adds (its status page).
package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Probes answers the health endpoints. Its zero value is a daemon that is
// starting: live, not ready. Its methods may be called from any goroutine.
type Probes struct {
	// stopping is set when shutdown begins. Readiness then fails, so that
	// nothing counts on a process that is going away; liveness stays green,
	// as failing it would ask the kubelet to restart the process while it
	// finishes its pass or spools what it fetched.
	stopping atomic.Bool
	// ready returns why the daemon cannot do its job, or nil; nil until
	// the daemon has opened its stores.
	ready atomic.Pointer[func(context.Context) error]
}

// SetReady makes readiness ask f, which returns why the daemon cannot do
// its job, or nil.
func (p *Probes) SetReady(f func(context.Context) error) { p.ready.Store(&f) }

// Stopping makes readiness fail from now on: shutdown has begun.
func (p *Probes) Stopping() { p.stopping.Store(true) }

// Server is the daemon's listener for probes and metrics. Serve starts
// it; its owner calls Stop, which returns once it has stopped.
type Server struct {
	srv  *http.Server
	done chan struct{} // closed when Serve has returned
}

// Stop shuts the server down, giving requests in progress up to 5
// seconds, and waits until it has stopped serving.
func (h *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		h.srv.Close()
	}
	<-h.done
}

// Pages adds routes of its own to the listener's, such as a status page.
type Pages interface {
	Register(mux *http.ServeMux)
}

// Serve serves /healthz, /readyz (as p says), /metrics (the series of
// reg) and the routes of pages on ln until Stop; log receives the address
// and a failure to serve.
func Serve(ln net.Listener, p *Probes, reg *prometheus.Registry, log *slog.Logger, pages ...Pages) *Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", p.serveReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	for _, pg := range pages {
		pg.Register(mux)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
	}
	h := &Server{srv: srv, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	}()
	log.Info("serving health and metrics", "addr", ln.Addr().String())
	return h
}

// serveReady is /readyz: 200 when the daemon can do its job, 503 with the
// reason otherwise.
func (p *Probes) serveReady(w http.ResponseWriter, r *http.Request) {
	rctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	if p.stopping.Load() {
		http.Error(w, "shutting down: no new passes; a running pass finishes or spools what it fetched", http.StatusServiceUnavailable)
		return
	}
	ready := p.ready.Load()
	if ready == nil {
		// Opening the stores waits on ClickHouse (up to its dial
		// timeout during an outage): say so, rather than a bare
		// "starting" that leaves an operator guessing.
		http.Error(w, "starting: opening the spool and connecting to ClickHouse", http.StatusServiceUnavailable)
		return
	}
	if err := (*ready)(rctx); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}
