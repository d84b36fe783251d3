package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	gosync "sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/internal/status"
	"github.com/readsync/readsync/sink/sinktest"
)

// statusSchema is the schema status.json is documented by.
const statusSchema = "../../docs/status.schema.json"

// statusFixture is a daemon's fixture with one good name and two that
// fail, on a schedule that ticks every second, whose ClickHouse goes
// through a proxy the test can take down.
func statusFixture(t *testing.T) (*fixture, *sinktest.Proxy) {
	t.Helper()
	good := apitest.Project{ID: 1, NFT: "good.eth", Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 2, Percent: "50.00%"}}}
	names := []string{"good.eth", "missing.eth", "denied.eth"}
	f := newFixture(t, names, apitest.WithProjects(good),
		apitest.WithFault("missing.eth", apitest.FailureEnvelope()),
		apitest.WithFault("denied.eth", apitest.StatusFault(http.StatusForbidden, `{"msg":"denied"}`)))
	proxy := f.DB.NewProxy(t)
	f.Env["READSYNC_CLICKHOUSE_DSN"] = proxy.DSN
	f.Env["READSYNC_RETAIN_RAW"] = "90d"
	f.WriteSchedules(t, "fast", "@every 1s", names)
	return f, proxy
}

// getStatus reads and decodes /status.json, checking it against the
// schema.
func getStatus(t *testing.T, base string) (status.Status, string) {
	t.Helper()
	st, body, ok := tryStatus(t, base)
	if !ok {
		t.Fatalf("/status.json: %s", body)
	}
	return st, body
}

// tryStatus is getStatus for a daemon that may still be opening its
// stores, when the page answers 503.
func tryStatus(t *testing.T, base string) (status.Status, string, bool) {
	t.Helper()
	code, body := apptest.Get(t, base, "/status.json")
	if code == http.StatusServiceUnavailable && strings.HasPrefix(body, "starting") {
		return status.Status{}, body, false
	}
	if code != http.StatusOK {
		t.Fatalf("/status.json: %d %s", code, body)
	}
	checkStatusSchema(t, body)
	var st status.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/status.json: %v\n%s", err, body)
	}
	return st, body, true
}

// checkStatusSchema validates a status.json against the documented
// schema, formats (date-time) included.
func checkStatusSchema(t *testing.T, body string) {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile(statusSchema)
	if err != nil {
		t.Fatalf("compile %s: %v", statusSchema, err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/status.json is no JSON: %v", err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Errorf("/status.json does not follow %s: %v\n%s", statusSchema, err, body)
	}
}

// The status page of a running daemon shows its schedule and last pass,
// the failing names with their kind and error, most passes in a row
// first, the reconcile, the retentions, the server and the schema, as
// HTML and as JSON that follows its schema. With ClickHouse down it keeps
// what it read last, says so with its age, and shows the spool the passes
// fill meanwhile. No secret appears on it.
func TestStatusPage(t *testing.T) {
	t.Parallel()
	f, proxy := statusFixture(t)
	f.Env["READSYNC_STATUS_INTERVAL"] = "1s"
	// The spool keeps what the passes write while ClickHouse is down.
	f.Env["READSYNC_SPOOL_FLUSH_INTERVAL"] = "1h"
	log, _ := f.startDaemon(t)
	base := apptest.ListenerURL(t, log.String)

	var st status.Status
	apptest.Eventually(t, "two failing names, failing two passes in a row or more, and a last pass", func() bool {
		st, _, _ = tryStatus(t, base)
		return len(st.Failing.Names) == 2 && st.Failing.Names[1].FailingPasses >= 2 &&
			len(st.Schedules) == 1 && st.Schedules[0].LastPass != nil && st.Reconcile.LastStepAt != nil
	}, log.String)
	s := st.Schedules[0]
	if s.Name != "fast" || s.Cron != "@every 1s" || s.Shard != "all" || s.LastPass.Status != "partial" ||
		s.LastPass.NamesOK != 1 || s.LastPass.NamesFailed != 2 || s.NamesFailing != 2 || s.NextPass.IsZero() {
		t.Errorf("schedule: %+v, last pass %+v; want fast, @every 1s, all, a partial pass of 1 name ok and 2 failed, 2 failing", s, *s.LastPass)
	}
	if st.Failing.Total != 2 {
		t.Errorf("failing names: total %d, want 2", st.Failing.Total)
	}
	kinds := map[string]status.Name{}
	for _, n := range st.Failing.Names {
		kinds[n.NFT] = n
	}
	if n := kinds["denied.eth"]; n.Kind != "http_4xx" || !strings.Contains(n.LastError, "403") || n.Schedule != "fast" {
		t.Errorf("denied.eth: %+v, want kind http_4xx and its 403", n)
	}
	if n := kinds["missing.eth"]; n.Kind != "not_found" || n.LastSuccessAt != nil {
		t.Errorf("missing.eth: %+v, want kind not_found, never read", n)
	}
	if a, b := st.Failing.Names[0], st.Failing.Names[1]; a.FailingPasses < b.FailingPasses {
		t.Errorf("failing names: %s (%d passes) before %s (%d), want most passes in a row first", a.NFT, a.FailingPasses, b.NFT, b.FailingPasses)
	}
	ch := st.ClickHouse
	if !ch.Answering || ch.ServerVersion == "" || ch.Migration == 0 || ch.Migration != ch.Latest || len(ch.Pending) != 0 || ch.Database != f.DB.Name {
		t.Errorf("clickhouse: %+v, want answering, its version, the schema current, the database %s", ch, f.DB.Name)
	}
	if len(st.Expiry.Retentions) != 3 || st.Expiry.Retentions[0] != (status.Retention{Resolution: "raw", Keep: "90d"}) ||
		st.Expiry.Retentions[2].Keep != "forever" {
		t.Errorf("retentions: %+v, want raw 90d and daily forever", st.Expiry.Retentions)
	}
	if st.Reconcile.Error != "" {
		t.Errorf("reconcile: %+v", st.Reconcile)
	}

	code, page := apptest.Get(t, base, "/")
	for _, want := range []string{"<td>denied.eth</td>", "<td>missing.eth</td>", "http_4xx", "HTTP 403", "<code>@every 1s</code>",
		ch.ServerVersion, "90d", `class="partial"`} {
		if !strings.Contains(page, want) {
			t.Errorf("GET / lacks %q", want)
		}
	}
	if code != http.StatusOK || strings.Contains(page, "<script") || strings.Contains(page, "clickhouse-down") {
		t.Errorf("GET /: %d, want 200, no script, no banner:\n%s", code, page)
	}
	f.NoSecrets(t, page)

	proxy.Down()
	apptest.Eventually(t, "the page saying ClickHouse does not answer, and the spool the passes fill", func() bool {
		st, _ = getStatus(t, base)
		return !st.ClickHouse.Answering && st.Spool.Entries > 0 && st.Spool.Oldest != nil
	}, log.String)
	if st.ClickHouse.Error == "" || st.ClickHouse.ReadAt == nil || st.ClickHouse.AgeSeconds == nil || len(st.Failing.Names) != 2 ||
		st.Schedules[0].LastPass == nil || st.ClickHouse.ServerVersion != ch.ServerVersion {
		t.Errorf("with ClickHouse down: %+v, failing %+v; want why, the last read and its age, and what it read", st.ClickHouse, st.Failing)
	}
	if st.Spool.Bytes <= 0 || st.Spool.Oldest.After(st.GeneratedAt) {
		t.Errorf("spool: %+v, want bytes and its oldest entry's time", st.Spool)
	}
	_, page = apptest.Get(t, base, "/")
	for _, want := range []string{`id="clickhouse-down"`, "ClickHouse does not answer", "<td>denied.eth</td>", "Oldest entry"} {
		if !strings.Contains(page, want) {
			t.Errorf("GET / with ClickHouse down lacks %q", want)
		}
	}
	_, body := apptest.Get(t, base, "/status.json")
	f.NoSecrets(t, page+body)
	proxy.Up()
}

// However many people look at the page, it reads ClickHouse once per
// READSYNC_STATUS_INTERVAL: 400 concurrent requests between two reads
// make no read, as the page's own count and, where the server keeps one,
// its query log say.
func TestStatusPageReadsOncePerInterval(t *testing.T) {
	t.Parallel()
	f, _ := statusFixture(t)
	f.Env["READSYNC_STATUS_INTERVAL"] = "1h"
	// A server that keeps a query log logs the daemon's statements.
	dsn, err := url.Parse(f.Env["READSYNC_CLICKHOUSE_DSN"])
	if err != nil {
		t.Fatal(err)
	}
	q := dsn.Query()
	q.Set("log_queries", "1")
	dsn.RawQuery = q.Encode()
	f.Env["READSYNC_CLICKHOUSE_DSN"] = dsn.String()
	log, _ := f.startDaemon(t)
	base := apptest.ListenerURL(t, log.String)
	apptest.Eventually(t, "the page's first read of ClickHouse", func() bool {
		st, _, _ := tryStatus(t, base)
		return st.ClickHouse.Answering
	}, log.String)

	const viewers, each = 100, 4
	var wg gosync.WaitGroup
	errs := make(chan error, viewers*each)
	for v := range viewers {
		wg.Go(func() {
			for i := range each {
				path := []string{"/", "/status.json"}[(v+i)%2]
				resp, err := http.Get(base + path)
				if err != nil {
					errs <- err
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("%s: %s", path, resp.Status)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st, _ := getStatus(t, base)
	if st.ClickHouse.Reads != 1 {
		t.Errorf("reads of ClickHouse after %d requests: %d, want 1", viewers*each, st.ClickHouse.Reads)
	}
	var logs uint64
	f.Query(t, "SELECT count() FROM system.tables WHERE database = 'system' AND name = 'query_log'", &logs)
	if logs == 0 {
		t.Logf("the server keeps no system.query_log: the page's own count of its reads stands alone")
		return
	}
	if err := f.DB.Conn.Exec(t.Context(), "SYSTEM FLUSH LOGS"); err != nil {
		t.Fatalf("SYSTEM FLUSH LOGS: %v", err)
	}
	var reads uint64
	f.Query(t, fmt.Sprintf("SELECT count() FROM system.query_log WHERE type = 2 AND query LIKE '%%{db}.`name_health`%%LIMIT %d%%'", status.MaxFailing), &reads)
	if reads != 1 {
		t.Errorf("reads of the failing names in system.query_log: %d, want 1", reads)
	}
}

// A ClickHouse that refuses the DSN's password: the page says that it
// does not answer and why, and the password appears nowhere on it.
func TestStatusPageHidesTheDSNPassword(t *testing.T) {
	// A failed login takes a server that cannot survive one down for every
	// other test.
	sinktest.Require(t, sinktest.SurvivesFailedLogin)
	t.Parallel()
	const password = "status-page-dsn-password"
	f, _ := statusFixture(t)
	dsn, err := url.Parse(f.Env["READSYNC_CLICKHOUSE_DSN"])
	if err != nil {
		t.Fatal(err)
	}
	dsn.User = url.UserPassword("readsync_no_such_user", password)
	f.Env["READSYNC_CLICKHOUSE_DSN"] = dsn.String()
	f.Env["READSYNC_STATUS_INTERVAL"] = "1s"
	f.Secrets = append(f.Secrets, password)
	log, _ := f.startDaemon(t)
	base := apptest.ListenerURL(t, log.String)
	var st status.Status
	apptest.Eventually(t, "the page saying why ClickHouse does not answer", func() bool {
		var ok bool
		st, _, ok = tryStatus(t, base)
		return ok && st.ClickHouse.Reads > 0 && st.ClickHouse.Error != "not read yet"
	}, log.String)
	t.Logf("the page says: %s", st.ClickHouse.Error)
	if st.ClickHouse.Answering || st.ClickHouse.Error == "" || st.ClickHouse.ReadAt != nil {
		t.Errorf("clickhouse: %+v, want not answering, why, and nothing read", st.ClickHouse)
	}
	_, page := apptest.Get(t, base, "/")
	_, body := apptest.Get(t, base, "/status.json")
	if !strings.Contains(page, "ClickHouse does not answer") || !strings.Contains(page, "Nothing has been read from it since start") {
		t.Errorf("GET / lacks the banner:\n%s", page)
	}
	f.NoSecrets(t, page+body)
}
