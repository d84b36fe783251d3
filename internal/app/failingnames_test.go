package app

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/sink/sinktest"
)

// --failing-names prints the names failing now, most passes in a row
// first, as text or JSON lines, and exits 1 while any is failing, 0 when
// none of the schedule asked for is, and 2 on a usage error.
func TestFailingNamesFlag(t *testing.T) {
	t.Parallel()
	good := apitest.Project{ID: 1, NFT: "good.eth", Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 2, Percent: "50.00%"}}}
	f := newFixture(t, []string{"good.eth", "missing.eth", "denied.eth"}, apitest.WithProjects(good),
		apitest.WithFault("missing.eth", apitest.FailureEnvelope()),
		apitest.WithFault("denied.eth", apitest.StatusFault(http.StatusForbidden, `{"msg":"denied"}`)))
	now := time.Now().UTC().Truncate(time.Second)
	if code, _, stderr := f.run(t, "--failing-names"); code != ExitFailed || !strings.Contains(stderr, "readsync --migrate") {
		t.Errorf("--failing-names before the schema: exit %d, want %d and to be told to migrate\n%s", code, ExitFailed, stderr)
	}
	if code, _, stderr := f.run(t, "--migrate"); code != ExitOK {
		t.Fatalf("--migrate: exit %d\n%s", code, stderr)
	}
	if code, _, _ := f.run(t, "--failing-names"); code != ExitOK {
		t.Errorf("--failing-names before any pass: exit %d, want %d", code, ExitOK)
	}
	for _, at := range []time.Time{now.Add(-3 * time.Minute), now.Add(-2 * time.Minute)} {
		f.run(t, "--backfill", "--snapshot-at", at.Format(time.RFC3339))
	}
	// denied.eth fails once more, in a backfill of its own.
	f.run(t, "--backfill", "--nft", "denied.eth", "--snapshot-at", now.Add(-time.Minute).Format(time.RFC3339))

	code, stdout, stderr := f.run(t, "--failing-names")
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != ExitFailed || len(lines) != 2 {
		t.Fatalf("--failing-names: exit %d, want %d, and two lines:\n%s%s", code, ExitFailed, stdout, stderr)
	}
	for i, want := range [][2]string{{"\tdenied.eth\t3\thttp_4xx\t", "HTTP 403 Forbidden"}, {"\tmissing.eth\t2\tnot_found\t", "upstream reported failure"}} {
		if !strings.HasPrefix(lines[i], want[0]) || !strings.Contains(lines[i], want[1]) {
			t.Errorf("line %d: %q, want it to start with %q and say %q", i+1, lines[i], want[0], want[1])
		}
	}

	code, stdout, _ = f.run(t, "--failing-names", "--json")
	if code != ExitFailed {
		t.Errorf("--failing-names --json: exit %d, want %d", code, ExitFailed)
	}
	var rows []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		rows = append(rows, row)
	}
	if len(rows) != 2 {
		t.Fatalf("--json: %d lines, want 2:\n%s", len(rows), stdout)
	}
	want := map[string]any{"schedule": "", "nft": "denied.eth", "last_success_at": "1970-01-01T00:00:00Z", "last_failure_at": now.Add(-time.Minute).Format(time.RFC3339),
		"last_error_kind": "http_4xx", "last_http_status": float64(403), "failures_24h": float64(3), "failing_passes": float64(3)}
	for k, v := range want {
		if rows[0][k] != v {
			t.Errorf("--json: %s is %v, want %v (%v)", k, rows[0][k], v, rows[0])
		}
	}
	if len(rows[0]) != 9 || !strings.Contains(rows[0]["last_error"].(string), "403") {
		t.Errorf("--json: %v, want the view's nine columns and the error", rows[0])
	}

	if code, stdout, _ := f.run(t, "--failing-names", "--schedule", "hourly"); code != ExitOK || stdout != "" {
		t.Errorf("--failing-names --schedule hourly, which no pass of ran: exit %d, want %d, and nothing:\n%s", code, ExitOK, stdout)
	}
	for _, args := range [][]string{{"--json"}, {"--failing-names", "--schedule", "weekly"}, {"--failing-names", "--verify"}} {
		if code, _, stderr := f.run(t, args...); code != ExitConfig {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, ExitConfig, stderr)
		}
	}
}

// A backfill over a name of each kind of failure the fake upstream can
// serve, beside good ones, leaves a row in name_failures for each failing
// name, with its stage, kind, HTTP status and attempts, and no secret in
// any column; the good ones, a project without messages included, are in
// name_successes.
func TestNameFailuresRecordEachKind(t *testing.T) {
	t.Parallel()
	good := apitest.Project{ID: 1, NFT: "good.eth", Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 2, Percent: "50.00%"}}}
	empty := apitest.Project{ID: 2, NFT: "empty.eth"}
	unlisted := apitest.Project{ID: 3, NFT: "unlisted.eth"}
	want := map[string]string{ // nft: stage kind http_status attempts
		"missing.eth":   "details not_found 0 2",
		"forbidden.eth": "details http_4xx 403 1",
		"broken.eth":    "details http_5xx 502 2",
		"limited.eth":   "details http_429 429 2",
		"garbled.eth":   "details decode 0 2",
		"cut.eth":       "details decode 0 2",
		"slow.eth":      "details timeout 0 2",
		"unlisted.eth":  "list refused 0 2",
	}
	names := []string{"good.eth", "empty.eth"}
	for n := range want {
		names = append(names, n)
	}
	f := newFixture(t, names, apitest.WithProjects(good, empty, unlisted),
		apitest.WithFault("missing.eth", apitest.FailureEnvelope()),
		apitest.WithFault("forbidden.eth", apitest.StatusFault(http.StatusForbidden, "")),
		apitest.WithFault("broken.eth", apitest.StatusFault(http.StatusBadGateway, "")),
		apitest.WithFault("limited.eth", apitest.RateLimited("0")),
		apitest.WithFault("garbled.eth", apitest.InvalidJSON()),
		apitest.WithFault("cut.eth", apitest.Truncated(10)),
		apitest.WithFault("slow.eth", apitest.Slow(3*time.Second)),
		apitest.WithListFault(unlisted.ID, apitest.FailureEnvelope()))
	f.Env["READSYNC_MAX_RETRIES"] = "1"
	f.Env["READSYNC_REQUEST_TIMEOUT"] = "300ms"
	if code, _, stderr := f.run(t, "--backfill"); code != ExitFailed {
		t.Fatalf("--backfill: exit %d, want %d\n%s", code, ExitFailed, stderr)
	}
	rows, err := f.DB.Conn.Query(context.Background(), "SELECT nft, stage, kind, http_status, attempts, run_id, shard, schedule, error FROM "+f.DB.Table("name_failures"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var nft, stage, kind, runID, shard, schedule, text string
		var status uint16
		var attempts uint32
		if err := rows.Scan(&nft, &stage, &kind, &status, &attempts, &runID, &shard, &schedule, &text); err != nil {
			t.Fatal(err)
		}
		if _, twice := got[nft]; twice {
			t.Errorf("%s: two failure rows for one pass", nft)
		}
		got[nft] = fmt.Sprintf("%s %s %d %d", stage, kind, status, attempts)
		f.NoSecrets(t, strings.Join([]string{nft, stage, kind, runID, shard, schedule, text}, " "))
		if text == "" || runID == "" {
			t.Errorf("%s: error %q, run %q", nft, text, runID)
		}
	}
	rows.Close()
	if !maps.Equal(got, want) {
		t.Errorf("name_failures:\n%v\nwant\n%v", got, want)
	}
	read := sinktest.Lines(t, f.DB.Conn, "SELECT nft FROM "+f.DB.Table("name_successes")+" ORDER BY nft")
	if !slices.Equal(read, []string{"empty.eth", "good.eth"}) {
		t.Errorf("name_successes: %v, want empty.eth and good.eth", read)
	}
}

// The daemon's metrics of the failing names come from name_health: they
// count the names that failed READSYNC_NAMES_NOT_READ_PASSES passes in a
// row, and a daemon started again reports them before its first pass.
func TestNamesNotReadSurvivesARestart(t *testing.T) {
	t.Parallel()
	good := apitest.Project{ID: 1, NFT: "good.eth", Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 2, Percent: "50.00%"}}}
	f := newFixture(t, nil, apitest.WithProjects(good), apitest.WithFault("missing.eth", apitest.FailureEnvelope()))
	f.Env["READSYNC_NAMES_NOT_READ_PASSES"] = "2"
	f.WriteSchedules(t, "fast", "@every 1s", []string{"good.eth", "missing.eth"})
	notRead := `readsync_names_not_read{schedule="fast"} 1`
	log, stop := f.startDaemon(t)
	base := apptest.ListenerURL(t, log.String)
	apptest.Eventually(t, "a name not read for two passes in the metrics", func() bool {
		_, m := apptest.Get(t, base, "/metrics")
		return strings.Contains(m, notRead) && strings.Contains(m, `readsync_names_failing{schedule="fast"} 1`)
	}, log.String)
	passFinished := `"msg":"pass finished"`
	if !strings.Contains(log.String(), passFinished) {
		t.Fatalf("no %s in the log of the passes:\n%s", passFinished, log.String())
	}
	if code := stop(); code != ExitOK {
		t.Fatalf("daemon exit %d", code)
	}

	// Started again on an hourly schedule, it runs no pass for a while.
	f.WriteSchedules(t, "fast", "@every 1h", []string{"good.eth", "missing.eth"})
	log, stop = f.startDaemon(t)
	defer stop()
	base = apptest.ListenerURL(t, log.String)
	apptest.Eventually(t, "the count from name_health after the restart", func() bool {
		_, m := apptest.Get(t, base, "/metrics")
		return strings.Contains(m, notRead)
	}, log.String)
	if strings.Contains(log.String(), passFinished) {
		t.Errorf("a pass ran after the restart: the count must come from the view")
	}
}
