package apiclient

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
)

// StatusError reports a response whose HTTP status is not 2xx.
type StatusError struct {
	StatusCode int
	// RetryAfter is the Retry-After header as sent, empty when absent.
	RetryAfter string
	// Snippet is the start of the body with control characters and runs of
	// white space folded, for the log line.
	Snippet string
	// Hint, when set, says what to do about it; a 401 or 403 gets the
	// client's Config.CredentialsHint.
	Hint string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Snippet != "" {
		msg += ": " + e.Snippet
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

const snippetBytes = 200

func newStatusError(resp *http.Response) *StatusError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, snippetBytes))
	return &StatusError{
		StatusCode: resp.StatusCode,
		RetryAfter: resp.Header.Get("Retry-After"),
		Snippet:    foldSnippet(string(b)),
	}
}

// foldSnippet keeps a body excerpt on one printable line.
func foldSnippet(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, "?") {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// EnvelopeError reports a response whose envelope does not say success:
// code other than 1, or success other than true.
type EnvelopeError struct {
	// Code is the envelope's code as it appeared in the JSON, empty if absent.
	Code string
	// Success is the envelope's success flag.
	Success bool
	// Msg is the envelope's status text.
	Msg string
}

func (e *EnvelopeError) Error() string {
	code := e.Code
	if code == "" {
		code = "missing"
	}
	return fmt.Sprintf("upstream reported failure (code %s, success %t, msg %q)", code, e.Success, e.Msg)
}

// ErrNotRegistered is in the chain of a project-details error whose
// response was the failure envelope. The spec gives the API no other way to
// say that no project is bound to an nft name, so a misspelt or unregistered
// name fails this way, though passing trouble may too (which is why the
// envelope is retried once).
var ErrNotRegistered = errors.New("the nft name may not be registered: the API answers so for a name it does not know, and gives no other sign")

// Unavailable reports whether err, a request's error after its retries,
// says that the upstream as a whole did not answer rather than anything
// about what was asked: the connection was refused or reset or the host
// not found, no complete response came within the request timeout, or the
// answer was HTTP 5xx or 429. A failure envelope, another 4xx, a malformed
// or oversized body, a refused redirect or a cancelled request is not.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, errCrossOrigin) {
		return false
	}
	switch outcome(err) {
	case "network", "timeout", "http_5xx", "http_429":
		return true
	}
	return false
}
