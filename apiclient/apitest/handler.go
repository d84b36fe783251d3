package apitest

import (
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"time"
)

const contentTypeJSON = "application/json; charset=utf-8"

// flushSize is how much of a list response is buffered before it is written
// out, so a large list is streamed rather than built in memory.
const flushSize = 32 << 10

// serveFunc serves one operation once the path, method and faults have been
// dealt with. q is the parsed query of r.
type serveFunc func(w http.ResponseWriter, r *http.Request, q url.Values)

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.handlers.Add(1)
	defer s.handlers.Done()
	s.record(r)
	delay(r.Context(), s.latency)

	q := r.URL.Query()
	var (
		serve serveFunc
		fault *faultEntry
	)
	switch r.URL.Path {
	case DetailPath:
		serve = s.serveDetail
		fault = s.detailFault(q.Get("nft_name"))
	case ListPath:
		serve = s.serveList
		if id, err := projectID(q); err == nil {
			fault = s.listFault(id)
		}
	default:
		writeFailure(w, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeFailure(w, http.StatusMethodNotAllowed)
		return
	}
	if fault.fire() && !applyFault(w, r, q, fault.fault, serve) {
		return
	}
	serve(w, r, q)
}

func (s *Server) serveDetail(w http.ResponseWriter, r *http.Request, q url.Values) {
	if !s.authorized(r) {
		writeFailure(w, http.StatusUnauthorized)
		return
	}
	nft := q.Get("nft_name")
	if nft == "" {
		writeFailure(w, http.StatusOK)
		return
	}
	e := s.lookupNFT(nft)
	if e == nil {
		writeFailure(w, http.StatusOK)
		return
	}
	var buf bytes.Buffer
	buf.WriteString(successPrefix)
	if err := newRecordWriter(&buf).project(&e.p); err != nil {
		// SetProject rejects unencodable Extra values, so this is a
		// json.Marshaler failing; a broken connection is the honest answer.
		panic(http.ErrAbortHandler)
	}
	buf.WriteString(successSuffix)
	writeJSON(w, buf.Bytes())
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request, q url.Values) {
	if !s.authorized(r) {
		writeFailure(w, http.StatusUnauthorized)
		return
	}
	// The real client's tests rely on this rejection to prove the header is
	// sent.
	if !isJSONMediaType(r.Header.Get("Content-Type")) {
		writeFailure(w, http.StatusBadRequest)
		return
	}
	id, err := projectID(q)
	if err != nil {
		writeFailure(w, http.StatusOK)
		return
	}
	e := s.lookupID(id)
	if e == nil {
		writeFailure(w, http.StatusOK)
		return
	}
	if e.p.RawList != nil {
		writeJSON(w, slices.Concat([]byte(listPrefix), e.p.RawList, []byte(listSuffix)))
		return
	}
	streamList(w, &e.p, s.grow(e))
}

// streamList writes the list response for p, taking read counts from reads
// when it is not nil.
func streamList(w http.ResponseWriter, p *Project, reads []int64) {
	w.Header().Set("Content-Type", contentTypeJSON)
	var buf bytes.Buffer
	buf.WriteString(listPrefix + "[")
	rw := newRecordWriter(&buf)
	for i := range p.Messages {
		m := &p.Messages[i]
		if i > 0 {
			buf.WriteByte(',')
		}
		read, percent := m.ReadCount, m.Percent
		if reads != nil {
			read = reads[i]
			percent = PercentOf(read, m.Total)
		}
		if err := rw.message(m, read, percent); err != nil {
			// Part of the body may be out already; cutting the connection
			// keeps the client from mistaking it for a complete response.
			panic(http.ErrAbortHandler)
		}
		if buf.Len() >= flushSize {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return // the client went away
			}
			buf.Reset()
		}
	}
	buf.WriteString("]" + listSuffix)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) authorized(r *http.Request) bool {
	return headerEquals(r.Header, "client_id", s.clientID) &&
		headerEquals(r.Header, "client_secret", s.clientSecret)
}

// headerEquals reports whether h carries key exactly once with value want.
func headerEquals(h http.Header, key, want string) bool {
	v := h.Values(key)
	return len(v) == 1 && subtle.ConstantTimeCompare([]byte(v[0]), []byte(want)) == 1
}

func isJSONMediaType(v string) bool {
	mt, _, err := mime.ParseMediaType(v)
	return err == nil && mt == "application/json"
}

func projectID(q url.Values) (int64, error) {
	id, err := strconv.ParseInt(q.Get("project_id"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("project_id: %w", err)
	}
	return id, nil
}

func writeFailure(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", contentTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(failureBody)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, failureBody)
}

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", contentTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// applyFault carries out f and reports whether the request should then be
// served normally.
func applyFault(w http.ResponseWriter, r *http.Request, q url.Values, f Fault, serve serveFunc) bool {
	switch f.kind {
	case faultSlow:
		delay(r.Context(), f.delay)
		return true
	case faultResponse:
		for k, v := range f.header {
			w.Header()[k] = slices.Clone(v)
		}
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, f.body)
	case faultTruncate:
		truncate(w, r, q, f, serve)
	case faultReset:
		reset(w)
	}
	return false
}

// truncate renders the response serve would send, then writes it by hand on
// the hijacked connection with its full Content-Length but only a prefix of
// the body, and closes the connection.
func truncate(w http.ResponseWriter, r *http.Request, q url.Values, f Fault, serve serveFunc) {
	rec := httptest.NewRecorder()
	serve(rec, r, q)
	body := rec.Body.Bytes()
	h := rec.Header().Clone()
	for k, v := range f.header {
		h[k] = slices.Clone(v)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Connection", "close")
	h.Del("Transfer-Encoding")

	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 %03d %s\r\n", rec.Code, http.StatusText(rec.Code))
	_ = h.Write(rw)
	_, _ = rw.WriteString("\r\n")
	_, _ = rw.Write(f.cutBody(body))
	_ = rw.Flush()
}

// reset closes the connection with SO_LINGER 0, which makes the kernel send
// a TCP RST instead of an orderly FIN.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if l, ok := conn.(interface{ SetLinger(sec int) error }); ok {
		_ = l.SetLinger(0)
	}
	_ = conn.Close()
}

// delay waits for d. If ctx ends first, because the client gave up or the
// Server is closing, it aborts the handler: returning normally would make
// net/http send an empty 200 response, which a client could take for a real
// answer.
func delay(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		panic(http.ErrAbortHandler)
	}
}
