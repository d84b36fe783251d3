package app

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
)

// The daemon serves liveness at once, readiness only while ClickHouse is
// migrated and answering, and Prometheus metrics of its passes, requests
// and writes, with no nft name or secret in them.
func TestDaemonServesHealthAndMetrics(t *testing.T) {
	projects := apitest.Generate(3, 2, 12)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...),
		apitest.WithFault(projects[0].NFT, apitest.FailFirst(1, apitest.StatusFault(503, "busy"))))
	proxy := f.DB.NewProxy(t)
	f.Env["READSYNC_CLICKHOUSE_DSN"] = proxy.DSN
	f.Env["READSYNC_SPOOL_FLUSH_INTERVAL"] = "100ms"
	f.WriteSchedules(t, "fast", "@every 1s", apptest.NamesOf(projects))
	proxy.Down()

	log, stop := f.startDaemon(t)
	base := apptest.ListenerURL(t, log.String)

	if code, body := apptest.Get(t, base, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz during an outage: %d %s", code, body)
	}
	code, body := apptest.Get(t, base, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "ClickHouse") {
		t.Errorf("/readyz with ClickHouse down from the start: %d %q, want 503 naming ClickHouse", code, body)
	}

	proxy.Up()
	apptest.Eventually(t, "readiness", func() bool { c, _ := apptest.Get(t, base, "/readyz"); return c == http.StatusOK }, log.String)
	// A pass that began while ClickHouse was still down may have spooled
	// its rows and its run record: their INSERTs then come from the
	// flusher.
	apptest.Eventually(t, "a successful pass, its rows and its run record in the metrics", func() bool {
		_, m := apptest.Get(t, base, "/metrics")
		// The series is there from the start, at 0.
		return apptest.PassedOK(m, "fast") && strings.Contains(m, `readsync_inserts_total{outcome="ok",table="sync_runs"}`) &&
			strings.Contains(m, `readsync_rows_written_total{table="message_read_snapshots"}`)
	}, log.String)

	_, m := apptest.Get(t, base, "/metrics")
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
	for _, n := range apptest.NamesOf(projects) {
		if strings.Contains(m, n) {
			t.Errorf("metrics carry the nft name %q", n)
		}
	}
	f.NoSecrets(t, m)

	proxy.Down()
	apptest.Eventually(t, "unreadiness", func() bool { c, _ := apptest.Get(t, base, "/readyz"); return c == http.StatusServiceUnavailable }, log.String)
	if code := stop(); code != ExitOK {
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
	f.Env["READSYNC_HTTP_ADDR"] = busy.Addr().String()
	code, _, stderr := f.run(t)
	if code != ExitConfig || !strings.Contains(stderr, "READSYNC_HTTP_ADDR") || !strings.Contains(stderr, "address already in use") {
		t.Errorf("exit %d, want 2 naming READSYNC_HTTP_ADDR:\n%s", code, stderr)
	}
}

// Every armed schedule has its series from the start, before any pass:
// the alert on the time since the last success fires for a schedule that
// never succeeds, and partial passes can be compared with good ones.
func TestScheduleSeriesExistFromStart(t *testing.T) {
	f := newFixture(t, []string{"p.eth"})
	f.WriteSchedules(t, "yearly", "0 0 1 1 *", []string{"p.eth"})
	log, stop := f.startDaemon(t)
	base := apptest.ListenerURL(t, log.String)
	_, m := apptest.Get(t, base, "/metrics")
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
	apptest.WaitStarted(t, log.String)
	if code := stop(); code != ExitOK {
		t.Errorf("daemon exit %d", code)
	}
}

// Shutdown stops in the reverse order of start: the listener, which
// reports on ClickHouse, has stopped before ClickHouse closes.
func TestShutdownStopsTheListenerBeforeClickHouse(t *testing.T) {
	f := newFixture(t, []string{"p.eth"})
	f.Env["READSYNC_LOG_LEVEL"] = "debug"
	f.WriteSchedules(t, "yearly", "0 0 1 1 *", []string{"p.eth"})
	log, stop := f.startDaemon(t)
	base := apptest.ListenerURL(t, log.String)
	apptest.Eventually(t, "readiness", func() bool { c, _ := apptest.Get(t, base, "/readyz"); return c == http.StatusOK }, log.String)
	apptest.WaitStarted(t, log.String)
	if code := stop(); code != ExitOK {
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
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...),
		apitest.WithFault(stuck, apitest.Slow(10*time.Minute)))
	f.Env["READSYNC_SHUTDOWN_GRACE"] = "10m"
	f.Env["READSYNC_REQUEST_TIMEOUT"] = "10m"
	f.WriteSchedules(t, "fast", "@every 1s", apptest.NamesOf(projects))
	log, signal, wait := f.startDaemonSignalled(t)
	base := apptest.ListenerURL(t, log.String)
	apptest.Eventually(t, "readiness", func() bool { c, _ := apptest.Get(t, base, "/readyz"); return c == http.StatusOK }, log.String)
	apptest.Eventually(t, "the stuck name requested", func() bool {
		for _, r := range f.Srv.Requests() {
			if r.Query.Get("nft_name") == stuck {
				return true
			}
		}
		return false
	}, log.String)

	signal()
	apptest.Eventually(t, "shutdown begun", func() bool { return strings.Contains(log.String(), `"msg":"shutting down: no new passes`) }, log.String)
	if code, body := apptest.Get(t, base, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while draining: %d %q, want 200", code, body)
	}
	if code, body := apptest.Get(t, base, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz while draining: %d %q, want 503 saying it is shutting down", code, body)
	}
	if strings.Contains(log.String(), `"msg":"daemon stopped"`) {
		t.Fatalf("the daemon stopped before its pass ended; log:\n%s", log.String())
	}

	// Closing the upstream ends the stuck request, and with it the pass.
	f.Srv.Close()
	if code := wait(); code != ExitOK {
		t.Errorf("daemon exit %d; log:\n%s", code, log.String())
	}
}
