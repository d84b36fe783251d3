package apiclient

import (
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
