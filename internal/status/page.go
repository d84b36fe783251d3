package status

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Page serves a Board: GET / as HTML and GET /status.json as JSON. Until
// it is given its Board (Show), while the daemon opens its stores, both
// answer 503.
type Page struct {
	board atomic.Pointer[Board]
}

// Show makes the page show b from now on.
func (p *Page) Show(b *Board) { p.board.Store(b) }

// starting is what the page answers before it has a Board.
const starting = "starting: opening the spool and connecting to ClickHouse"

// NewPage returns a page with nothing to show yet.
func NewPage() *Page { return &Page{} }

// Register adds the page's routes to mux.
func (p *Page) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", p.serveHTML)
	mux.HandleFunc("GET /status.json", p.serveJSON)
}

func (p *Page) serveHTML(w http.ResponseWriter, r *http.Request) {
	b := p.board.Load()
	if b == nil {
		http.Error(w, starting, http.StatusServiceUnavailable)
		return
	}
	page := renderPage(b.Status(time.Now()))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(page))
}

func (p *Page) serveJSON(w http.ResponseWriter, r *http.Request) {
	b := p.board.Load()
	if b == nil {
		http.Error(w, starting, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(b.Status(time.Now()))
}

// when renders a time, "never" for none.
func when(t any) string {
	switch v := t.(type) {
	case *time.Time:
		if v == nil {
			return "never"
		}
		return when(*v)
	case time.Time:
		if v.IsZero() {
			return "never"
		}
		return v.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return fmt.Sprint(t)
}

// ago renders how long ago t was, relative to now.
func ago(now time.Time, t any) string {
	switch v := t.(type) {
	case *time.Time:
		if v == nil {
			return ""
		}
		return ago(now, *v)
	case time.Time:
		if v.IsZero() {
			return ""
		}
		d := now.Sub(v)
		if d < 0 {
			return "in " + (-d).Round(time.Second).String()
		}
		return d.Round(time.Second).String() + " ago"
	}
	return ""
}

// secs renders seconds as a duration.
func secs(s any) string {
	switch v := s.(type) {
	case *float64:
		if v == nil {
			return "unknown"
		}
		return secs(*v)
	case float64:
		d := time.Duration(v * float64(time.Second)).Round(time.Second).String()
		// 1h0m0s reads as 1h, 2m0s as 2m.
		if strings.HasSuffix(d, "m0s") {
			d = strings.TrimSuffix(d, "0s")
		}
		if strings.HasSuffix(d, "h0m") {
			d = strings.TrimSuffix(d, "0m")
		}
		return d
	}
	return fmt.Sprint(s)
}

// byteSize renders a size in bytes in binary units.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
