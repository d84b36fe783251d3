package status

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// benchBoard is a Board that has read an installation of 100 000
// failing names: the page lists MaxFailing of them.
func benchBoard() *Board {
	now := time.Now().UTC()
	st := Stored{ServerVersion: "26.7.2.1", Migration: 20, Latest: 20,
		Counts: map[string]Counts{"hourly": {Failing: 100_000, NotRead: 100_000}}, LastPasses: map[string]Pass{}}
	for i := range MaxFailing {
		st.Failing = append(st.Failing, Name{Schedule: "hourly", NFT: fmt.Sprintf("name-%06d.eth", i), FailingPasses: 5, Kind: "http_5xx",
			LastError: "HTTP 503 Service Unavailable", LastFailureAt: now})
	}
	b := NewBoard(Config{Version: "0.6.0", Database: "readsync", Interval: time.Minute,
		Schedules: []ScheduleConfig{{Name: "hourly", Cron: "0 * * * *", Next: func(t time.Time) time.Time { return t.Add(time.Hour) }}},
		Local:     func() Local { return Local{Shard: "all"} }})
	b.stored, b.readAt = st, now
	return b
}

// The time of GET / and GET /status.json does not grow with the names:
// they render what the Board read, at most MaxFailing names.
func BenchmarkPage(b *testing.B) {
	mux := http.NewServeMux()
	p := NewPage()
	p.Show(benchBoard())
	p.Register(mux)
	for _, path := range []string{"/", "/status.json"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", path, rec.Code)
				}
			}
		})
	}
}

// Before the daemon has opened its stores the page says it is starting;
// paths other than its own are not its.
func TestPageStarting(t *testing.T) {
	mux := http.NewServeMux()
	p := NewPage()
	p.Register(mux)
	for path, want := range map[string]int{"/": http.StatusServiceUnavailable, "/status.json": http.StatusServiceUnavailable, "/other": http.StatusNotFound} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s before Show: %d, want %d", path, rec.Code, want)
		}
	}
}

// Durations read as an operator writes them.
func TestSecs(t *testing.T) {
	for in, want := range map[float64]string{3600: "1h", 120: "2m", 90: "1m30s", 5400: "1h30m", 3661: "1h1m1s", 0.4: "0s"} {
		if got := secs(in); got != want {
			t.Errorf("secs(%v) = %q, want %q", in, got, want)
		}
	}
}

// What the page shows from ClickHouse and the upstream (names, errors,
// versions) is text, never markup.
func TestPageEscapesWhatItShows(t *testing.T) {
	b := benchBoard()
	b.stored.Failing[0].NFT = `<script>alert("x")</script>.eth`
	b.stored.Failing[0].LastError = `HTTP 500 <b>&</b>`
	mux := http.NewServeMux()
	p := NewPage()
	p.Show(b)
	p.Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := rec.Body.String()
	for _, want := range []string{`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;.eth`, `HTTP 500 &lt;b&gt;&amp;&lt;/b&gt;`, `<h2 id="failing-names">`, `name-000001.eth`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "<b>") {
		t.Error("a value reached the page as markup")
	}
}
