package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// probes answers the daemon's health endpoints.
type probes struct {
	// stopping is set when shutdown begins. Readiness then fails, so that
	// nothing counts on a process that is going away; liveness stays green,
	// as failing it would ask the kubelet to restart the process while it
	// finishes its pass or spools what it fetched.
	stopping atomic.Bool
	// ready returns why the daemon cannot do its job, or nil; nil until
	// the daemon has opened its stores.
	ready atomic.Pointer[func(context.Context) error]
}

func (p *probes) setReady(f func(context.Context) error) { p.ready.Store(&f) }

// httpServer is the daemon's listener for probes and metrics. serveHTTP
// starts it; its owner calls stop, which returns once it has stopped.
type httpServer struct {
	srv  *http.Server
	done chan struct{} // closed when Serve has returned
}

// stop shuts the server down, giving requests in progress up to 5
// seconds, and waits until it has stopped serving.
func (h *httpServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		h.srv.Close()
	}
	<-h.done
}

// serveHTTP serves /healthz, /readyz and /metrics on ln until stop.
func (a *app) serveHTTP(ln net.Listener, p *probes) *httpServer {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
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
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{Registry: a.metrics.reg}))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
	}
	h := &httpServer{srv: srv, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("http server stopped", "err", err)
		}
	}()
	a.log.Info("serving health and metrics", "addr", ln.Addr().String())
	return h
}
