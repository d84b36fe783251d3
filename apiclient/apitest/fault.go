package apitest

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"
)

// Fault describes how the server misbehaves for a request it matches. A
// Fault is registered for a details request by nft_name (WithFault,
// Server.SetFault) or for a list request by project_id (WithListFault,
// Server.SetListFault); it fires whether or not that project exists.
//
// Build a Fault with one of the constructors (StatusFault, RateLimited,
// FailureEnvelope, InvalidJSON, Truncated, ConnReset, Slow) and optionally
// limit it with FailFirst. The zero Fault does nothing; registering it
// removes a fault. Fault is a value: its methods return modified copies, and
// each registration keeps its own request counter, so one Fault value may be
// registered for several keys.
type Fault struct {
	kind   faultKind
	status int
	header http.Header
	body   string
	cut    int
	delay  time.Duration
	// limit > 0 restricts the fault to the first limit matching requests.
	limit int
}

type faultKind int

const (
	faultNone faultKind = iota
	faultResponse
	faultTruncate
	faultReset
	faultSlow
)

// StatusFault makes the server answer with the given HTTP status and body.
// The Content-Type is application/json when body is valid JSON and is
// otherwise detected from the body, so an HTML error page is served as
// text/html as a misconfigured gateway would; WithHeader overrides it.
func StatusFault(status int, body string) Fault {
	ct := http.DetectContentType([]byte(body))
	if json.Valid([]byte(body)) {
		ct = contentTypeJSON
	}
	return Fault{
		kind:   faultResponse,
		status: status,
		header: http.Header{"Content-Type": {ct}},
		body:   body,
	}
}

// RateLimited makes the server answer 429 Too Many Requests with a plain
// text body and the given Retry-After header value (seconds or an HTTP date;
// served as given, so a malformed value can be tested too).
func RateLimited(retryAfter string) Fault {
	return StatusFault(http.StatusTooManyRequests, "Too Many Requests\n").
		WithHeader("Retry-After", retryAfter)
}

// FailureEnvelope makes the server answer HTTP 200 with the failure
// envelope, as the upstream does for a failed operation.
func FailureEnvelope() Fault {
	return StatusFault(http.StatusOK, failureBody)
}

// InvalidJSON makes the server answer HTTP 200 with Content-Type
// application/json and a body that is not valid JSON.
func InvalidJSON() Fault {
	f := StatusFault(http.StatusOK, `{"code":1,"data":NaN,"msg":"Process success","success":true}`)
	f.header.Set("Content-Type", contentTypeJSON)
	return f
}

// Truncated makes the server send the status line, the headers and the
// first n bytes of the body it would otherwise have sent, with a
// Content-Length of the full body, and then close the connection, so the
// client reads a valid prefix followed by an unexpected EOF. When n is zero
// or negative, or not shorter than the body, half of the body is sent.
func Truncated(n int) Fault {
	return Fault{kind: faultTruncate, cut: n}
}

// ConnReset makes the server close the connection with a TCP reset right
// after reading the request, without sending a response.
//
// net/http's Transport silently retries a GET once when a reused keep-alive
// connection fails this way, so a client may not observe a single reset
// limited with FailFirst(1, ...).
func ConnReset() Fault {
	return Fault{kind: faultReset}
}

// Slow makes the server wait for d before serving the request normally. If
// the request's context ends first (the client gave up, or the Server was
// closed) the server drops the connection without a response.
func Slow(d time.Duration) Fault {
	return Fault{kind: faultSlow, delay: d}
}

// FailFirst returns f restricted to the first n matching requests; later
// requests are served normally. This makes "fail, then recover" scenarios
// for retry logic. A limit already set on f is replaced; n <= 0 yields a
// Fault that never fires.
func FailFirst(n int, f Fault) Fault {
	if n <= 0 {
		return Fault{}
	}
	f.limit = n
	return f
}

// WithHeader returns a copy of f that also sets the response header key to
// value. It applies to faults that send a response: StatusFault,
// RateLimited, FailureEnvelope, InvalidJSON and Truncated.
func (f Fault) WithHeader(key, value string) Fault {
	f.header = f.header.Clone()
	if f.header == nil {
		f.header = make(http.Header)
	}
	f.header.Set(key, value)
	return f
}

// faultEntry is a registered Fault with its own counter of matching
// requests, shared by concurrent handlers.
type faultEntry struct {
	fault Fault
	hits  atomic.Int64
}

// fire reports whether the fault applies to one more matching request.
func (e *faultEntry) fire() bool {
	if e == nil || e.fault.kind == faultNone {
		return false
	}
	return e.fault.limit == 0 || e.hits.Add(1) <= int64(e.fault.limit)
}

// cutBody returns the prefix of body that a truncation fault sends.
func (f Fault) cutBody(body []byte) []byte {
	n := f.cut
	if n <= 0 || n >= len(body) {
		n = len(body) / 2
	}
	return body[:n]
}
