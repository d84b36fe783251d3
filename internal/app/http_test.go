package app

import (
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
)

var (
	listenLine = regexp.MustCompile(`"msg":"serving health and metrics","addr":"([^"]+)"`)
	okPasses   = regexp.MustCompile(`(?m)^readsync_passes_total\{schedule="fast",status="ok",trigger="cron"\} [1-9]`)
)

// listenerURL waits for the daemon's log to announce its listener and
// returns the listener's base URL.
func listenerURL(t *testing.T, log func() string) string {
	t.Helper()
	var base string
	eventually(t, "the listener", func() bool {
		m := listenLine.FindStringSubmatch(log())
		if m != nil {
			base = "http://" + m[1]
		}
		return m != nil
	}, log)
	return base
}

// get fetches a path from the daemon's listener.
func get(t *testing.T, base, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The daemon serves liveness at once, readiness only while ClickHouse is
// migrated and answering, and Prometheus metrics of its passes, requests
// and writes, with no nft name or secret in them.
func TestDaemonServesHealthAndMetrics(t *testing.T) {
	projects := apitest.Generate(3, 2, 12)
	f := newFixture(t, namesOf(projects), apitest.WithProjects(projects...),
		apitest.WithFault(projects[0].NFT, apitest.FailFirst(1, apitest.StatusFault(503, "busy"))))
	proxy := f.db.NewProxy(t)
	f.env["READSYNC_CLICKHOUSE_DSN"] = proxy.DSN
	f.env["READSYNC_SPOOL_FLUSH_INTERVAL"] = "100ms"
	f.writeSchedules(t, "fast", "@every 1s", namesOf(projects))
	proxy.Down()

	log, stop := f.startDaemon(t)
	base := listenerURL(t, log.String)

	if code, body := get(t, base, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz during an outage: %d %s", code, body)
	}
	code, body := get(t, base, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "ClickHouse") {
		t.Errorf("/readyz with ClickHouse down from the start: %d %q, want 503 naming ClickHouse", code, body)
	}

	proxy.Up()
	eventually(t, "readiness", func() bool { c, _ := get(t, base, "/readyz"); return c == http.StatusOK }, log.String)
	// A pass that began while ClickHouse was still down may have spooled
	// its run record: the record's INSERT then comes from the flusher.
	eventually(t, "a successful pass and its run record in the metrics", func() bool {
		_, m := get(t, base, "/metrics")
		// The series is there from the start, at 0.
		return okPasses.MatchString(m) && strings.Contains(m, `readsync_inserts_total{outcome="ok",table="sync_runs"}`)
	}, log.String)

	_, m := get(t, base, "/metrics")
	for _, want := range []string{
		`readsync_api_requests_total{operation="project_details",outcome="http_5xx"} 1`,
		`readsync_api_requests_total{operation="list_messages",outcome="ok"}`,
		`readsync_api_request_duration_seconds_bucket{operation="project_details"`,
		`readsync_rows_written_total{table="message_read_snapshots"}`,
		`readsync_inserts_total{outcome="ok",table="sync_runs"}`,
		`readsync_last_success_timestamp_seconds{schedule="fast"}`,
		`readsync_pass_duration_seconds_count{schedule="fast",trigger="cron"}`,
		`readsync_spool_bytes`,
		`readsync_spool_entries`,
		`readsync_spool_refused_rows_total 0`,
		`readsync_build_info{`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if !strings.HasPrefix(line, "readsync_") && !strings.HasPrefix(line, "go_") && !strings.HasPrefix(line, "process_") && !strings.HasPrefix(line, "promhttp_") {
			t.Errorf("series without the readsync_ prefix: %s", line)
		}
	}
	for _, n := range namesOf(projects) {
		if strings.Contains(m, n) {
			t.Errorf("metrics carry the nft name %q", n)
		}
	}
	f.noSecrets(t, m)

	proxy.Down()
	eventually(t, "unreadiness", func() bool { c, _ := get(t, base, "/readyz"); return c == http.StatusServiceUnavailable }, log.String)
	if code := stop(); code != exitOK {
		t.Errorf("daemon exit %d", code)
	}
}

func TestDaemonRefusesABusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	f := newFixture(t, []string{"p.eth"})
	f.env["READSYNC_HTTP_ADDR"] = busy.Addr().String()
	code, _, stderr := f.run(t)
	if code != exitConfig || !strings.Contains(stderr, "READSYNC_HTTP_ADDR") || !strings.Contains(stderr, "address already in use") {
		t.Errorf("exit %d, want 2 naming READSYNC_HTTP_ADDR:\n%s", code, stderr)
	}
}

// Every armed schedule has its series from the start, before any pass:
// the alert on the time since the last success fires for a schedule that
// never succeeds, and partial passes can be compared with good ones.
func TestScheduleSeriesExistFromStart(t *testing.T) {
	f := newFixture(t, []string{"p.eth"})
	f.writeSchedules(t, "yearly", "0 0 1 1 *", []string{"p.eth"})
	log, stop := f.startDaemon(t)
	base := listenerURL(t, log.String)
	_, m := get(t, base, "/metrics")
	for _, want := range []string{
		`readsync_last_success_timestamp_seconds{schedule="yearly"} 0`,
		`readsync_passes_total{schedule="yearly",status="ok",trigger="cron"} 0`,
		`readsync_passes_total{schedule="yearly",status="partial",trigger="cron"} 0`,
		`readsync_passes_total{schedule="yearly",status="failed",trigger="cron"} 0`,
		`readsync_names_failed_total{schedule="yearly"} 0`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	waitStarted(t, log.String)
	if code := stop(); code != exitOK {
		t.Errorf("daemon exit %d", code)
	}
}

// Shutdown stops in the reverse order of start: the listener, which
// reports on ClickHouse, has stopped before ClickHouse closes.
func TestShutdownStopsTheListenerBeforeClickHouse(t *testing.T) {
	f := newFixture(t, []string{"p.eth"})
	f.env["READSYNC_LOG_LEVEL"] = "debug"
	f.writeSchedules(t, "yearly", "0 0 1 1 *", []string{"p.eth"})
	log, stop := f.startDaemon(t)
	base := listenerURL(t, log.String)
	eventually(t, "readiness", func() bool { c, _ := get(t, base, "/readyz"); return c == http.StatusOK }, log.String)
	if code := stop(); code != exitOK {
		t.Fatalf("daemon exit %d", code)
	}
	out := log.String()
	listener := strings.Index(out, `"msg":"health and metrics listener stopped"`)
	closed := strings.Index(out, `"msg":"ClickHouse connection and spool closed"`)
	if listener < 0 || closed < 0 || listener > closed {
		t.Errorf("want the listener stopped before ClickHouse closes; log:\n%s", out)
	}
}

// A daemon draining after SIGTERM, its pass still running, stays live, so
// that the kubelet does not restart it mid-pass, and is not ready, saying
// why.
func TestDrainingDaemonIsLiveButNotReady(t *testing.T) {
	projects := apitest.Generate(2, 1, 5)
	stuck := projects[1].NFT
	f := newFixture(t, namesOf(projects), apitest.WithProjects(projects...),
		apitest.WithFault(stuck, apitest.Slow(10*time.Minute)))
	f.env["READSYNC_SHUTDOWN_GRACE"] = "10m"
	f.env["READSYNC_REQUEST_TIMEOUT"] = "10m"
	f.writeSchedules(t, "fast", "@every 1s", namesOf(projects))
	log, signal, wait := f.startDaemonSignalled(t)
	base := listenerURL(t, log.String)
	eventually(t, "readiness", func() bool { c, _ := get(t, base, "/readyz"); return c == http.StatusOK }, log.String)
	eventually(t, "the stuck name requested", func() bool {
		for _, r := range f.srv.Requests() {
			if r.Query.Get("nft_name") == stuck {
				return true
			}
		}
		return false
	}, log.String)

	signal()
	eventually(t, "shutdown begun", func() bool { return strings.Contains(log.String(), `"msg":"shutting down: no new passes`) }, log.String)
	if code, body := get(t, base, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while draining: %d %q, want 200", code, body)
	}
	if code, body := get(t, base, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz while draining: %d %q, want 503 saying it is shutting down", code, body)
	}
	if strings.Contains(log.String(), `"msg":"daemon stopped"`) {
		t.Fatalf("the daemon stopped before its pass ended; log:\n%s", log.String())
	}

	// Closing the upstream ends the stuck request, and with it the pass.
	f.srv.Close()
	if code := wait(); code != exitOK {
		t.Errorf("daemon exit %d; log:\n%s", code, log.String())
	}
}
