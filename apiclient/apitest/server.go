package apitest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"
)

// Paths of the two upstream operations.
const (
	DetailPath = "/platform/api/v1/projects/externalDetail"
	ListPath   = "/platform/api/v1/messages/list"
)

// Server is a running fake of the upstream API. Create it with NewServer and
// release it with Close, typically in t.Cleanup. All methods are safe for
// concurrent use, including while requests are being served.
type Server struct {
	// URL is the base URL of the server: "http://" and the listening host
	// and port, with no trailing slash. Append DetailPath or ListPath.
	URL string

	hs        *httptest.Server
	cancel    context.CancelFunc
	handlers  sync.WaitGroup
	closeOnce sync.Once

	clientID     string
	clientSecret string
	latency      time.Duration
	growth       int64
	requestLimit int // < 0: unlimited

	mu           sync.Mutex
	byNFT        map[string]*entry
	byID         map[int64]*entry
	detailFaults map[string]*faultEntry
	listFaults   map[int64]*faultEntry
	requests     []Request
	counts       map[string]int
}

// Request is a request as the Server received it.
type Request struct {
	Method string
	// Path is the decoded URL path.
	Path string
	// RawQuery is the query string as sent, without '?', which shows how
	// the client encoded it.
	RawQuery string
	Query    url.Values
	Header   http.Header
	// Time is when the server began handling the request.
	Time time.Time
}

// entry is a served project. p is never modified after the entry is stored;
// growth state is kept beside it under mu.
type entry struct {
	p Project

	mu     sync.Mutex
	passes uint64
	reads  []int64
}

// NewServer starts a fake upstream server configured by opts, listening on
// 127.0.0.1 at a port chosen by the system unless WithListener is given. It
// panics if it cannot listen, like httptest.NewServer. The caller must call
// Close to stop it.
func NewServer(opts ...Option) *Server {
	c := defaultConfig()
	for _, o := range opts {
		o(&c)
	}
	s := &Server{
		clientID:     c.clientID,
		clientSecret: c.clientSecret,
		latency:      c.latency,
		growth:       c.growth,
		requestLimit: c.requestLimit,
		byNFT:        make(map[string]*entry),
		byID:         make(map[int64]*entry),
		detailFaults: make(map[string]*faultEntry),
		listFaults:   make(map[int64]*faultEntry),
		counts:       make(map[string]int),
	}
	for _, p := range c.projects {
		s.SetProject(p)
	}
	for nft, f := range c.detailFaults {
		s.SetFault(nft, f)
	}
	for id, f := range c.listFaults {
		s.SetListFault(id, f)
	}

	// Cancelling the base context ends every request context, so Close does
	// not wait for latency or slow faults to run out.
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	h := http.HandlerFunc(s.serveHTTP)
	if c.listener != nil {
		s.hs = &httptest.Server{Listener: c.listener, Config: &http.Server{Handler: h}}
	} else {
		s.hs = httptest.NewUnstartedServer(h)
	}
	s.hs.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	s.hs.Start()
	s.URL = s.hs.URL
	return s
}

// Close stops accepting connections, ends the contexts of requests in
// flight so that delayed responses are abandoned, and waits until every
// handler has returned. Close is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.hs.Close()
		// httptest.Server stops tracking hijacked connections, so handlers
		// that hijacked (truncation, reset) are awaited separately. No new
		// handler can start once hs.Close has returned.
		s.handlers.Wait()
	})
}

// SetProject adds p, or replaces the projects that have p's NFT or p's ID,
// and restarts its read growth. The Server keeps a copy of p (see Project).
// SetProject panics if a value in an Extra map cannot be encoded by
// encoding/json, since that is a mistake in the test data.
func (s *Server) SetProject(p Project) {
	if err := p.checkExtra(); err != nil {
		panic(fmt.Sprintf("apitest: SetProject: %v", err))
	}
	e := &entry{p: p.clone()}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, old := range []*entry{s.byNFT[p.NFT], s.byID[p.ID]} {
		if old != nil {
			delete(s.byNFT, old.p.NFT)
			delete(s.byID, old.p.ID)
		}
	}
	s.byNFT[p.NFT] = e
	s.byID[p.ID] = e
}

// RemoveProject removes the project whose NFT is nft, if any, so that both
// operations stop finding it.
func (s *Server) RemoveProject(nft string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.byNFT[nft]; e != nil {
		delete(s.byNFT, nft)
		delete(s.byID, e.p.ID)
	}
}

// SetFault registers f for details requests whose nft_name is nft,
// replacing any fault registered for it and restarting its FailFirst count.
// The zero Fault removes the fault.
func (s *Server) SetFault(nft string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	setFault(s.detailFaults, nft, f)
}

// SetListFault registers f for list requests whose project_id is projectID,
// with the same rules as SetFault.
func (s *Server) SetListFault(projectID int64, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	setFault(s.listFaults, projectID, f)
}

func setFault[K comparable](m map[K]*faultEntry, k K, f Fault) {
	if f.kind == faultNone {
		delete(m, k)
		return
	}
	m[k] = &faultEntry{fault: f}
}

// Requests returns a copy of the requests received so far, oldest first,
// including rejected ones. See WithRequestLimit for how many are retained.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.retained()
	out := make([]Request, len(kept))
	for i, r := range kept {
		r.Query = cloneValues(r.Query)
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// RequestCount returns how many requests for path the server has received,
// counting every request since the start or the last ResetRequests.
func (s *Server) RequestCount(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[path]
}

// ResetRequests forgets the recorded requests and counts, so that a test
// can look at one sync pass at a time.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
	clear(s.counts)
}

func (s *Server) record(r *http.Request) {
	rec := Request{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Query:    r.URL.Query(),
		Header:   r.Header.Clone(),
		Time:     time.Now(),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[rec.Path]++
	if s.requestLimit == 0 {
		return
	}
	s.requests = append(s.requests, rec)
	if n := s.requestLimit; n > 0 && len(s.requests) >= 2*n {
		// Trimming only at twice the limit keeps recording amortised O(1);
		// the fresh slice lets the dropped requests be collected.
		s.requests = append([]Request(nil), s.requests[len(s.requests)-n:]...)
	}
}

// retained returns the recorded requests that Requests reports.
func (s *Server) retained() []Request {
	if n := s.requestLimit; n > 0 && len(s.requests) > n {
		return s.requests[len(s.requests)-n:]
	}
	return s.requests
}

func (s *Server) lookupNFT(nft string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byNFT[nft]
}

func (s *Server) lookupID(id int64) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

func (s *Server) detailFault(nft string) *faultEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.detailFaults[nft]
}

func (s *Server) listFault(id int64) *faultEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listFaults[id]
}

func cloneValues(v url.Values) url.Values {
	return url.Values(http.Header(v).Clone())
}
