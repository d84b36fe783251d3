package app

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
)

// A DSN on ClickHouse's HTTP port stops every mode that writes at start
// with exit 2, naming the variable, the address and the port to use;
// --check says so on its ClickHouse line.
func TestDSNOnTheHTTPPortExits2(t *testing.T) {
	t.Parallel()
	httpPort := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(httpPort.Close)
	addr := httpPort.Listener.Addr().String()
	env := baseEnv()
	env["READSYNC_CLICKHOUSE_DSN"] = "clickhouse://default:pa55word@" + addr + "/readsync"
	env["READSYNC_SPOOL_DIR"] = filepath.Join(t.TempDir(), "spool")
	env["READSYNC_HTTP_ADDR"] = "127.0.0.1:0"
	problem := "READSYNC_CLICKHOUSE_DSN: " + addr + ` answered the native protocol's hello with an HTTP reply ("HTTP/1.1 400 Bad Request"): ` +
		"that is ClickHouse's HTTP port; use its native port (tcp_port, 9000 by default) in a clickhouse:// DSN\n"
	for _, args := range [][]string{{"--backfill"}, {"--migrate"}, {"--flush-spool"}, nil} {
		t.Run(fmt.Sprint(args), func(t *testing.T) {
			code, stdout, stderr := runWith(t, env, args...)
			if code != ExitConfig || !strings.HasSuffix(stderr, "readsync: configuration: "+problem) {
				t.Errorf("exit %d, stderr\n%s\nwant exit 2 ending\nreadsync: configuration: %s", code, stdout+stderr, problem)
			}
		})
	}
	t.Run("--check", func(t *testing.T) {
		code, stdout, stderr := runWith(t, env, "--check")
		if code != ExitConfig || !strings.HasSuffix(stdout, "clickhouse: FAILED: "+problem) {
			t.Errorf("exit %d, output\n%s%s\nwant exit 2 and a last line\nclickhouse: FAILED: %s", code, stdout, stderr, problem)
		}
	})
}

// --check --all-names asks for every configured name within the rate
// limit and gives each that fails a line; the first name alone would have
// passed.
func TestCheckAllNamesListsTheFailingOnes(t *testing.T) {
	projects := apitest.Generate(6, 1, 31)
	srv := apitest.NewServer(apitest.WithProjects(projects...))
	t.Cleanup(srv.Close)
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	names := append(apptest.NamesOf(projects[:3]), "typo.eth", projects[3].NFT, "nobody.eth", projects[4].NFT)
	apptest.WriteSchedules(t, schedules, "hourly", "0 * * * *", names)
	env := map[string]string{
		"READSYNC_API_BASE_URL":   srv.URL,
		"READSYNC_CLIENT_ID":      apitest.DefaultClientID,
		"READSYNC_CLIENT_SECRET":  apitest.DefaultClientSecret,
		"READSYNC_SCHEDULES_FILE": schedules,
		"READSYNC_RETRY_BACKOFF":  "1ms",
		"READSYNC_RATE_LIMIT":     "200",
		"READSYNC_CONCURRENCY":    "3",
	}
	code, stdout, stderr := runWith(t, env, "--check", "--dry-run", "--all-names")
	hint := "upstream reported failure (code 0, success false, msg \"Process failed\"); " +
		"the nft name may not be registered: the API answers so for a name it does not know, and gives no other sign"
	want := fmt.Sprintf(`config: ok (%[1]s: 1 schedules, 7 nft names)
api: nft "typo.eth": FAILED: project details of nft "typo.eth": after 2 attempts: %[2]s
api: nft "nobody.eth": FAILED: project details of nft "nobody.eth": after 2 attempts: %[2]s
api: FAILED: 2 of 7 nft names of %[1]s failed
clickhouse: skipped (--dry-run)
`, schedules, hint)
	if code != ExitFailed || stdout != want {
		t.Errorf("exit %d, stdout\n%s\nwant exit 1 and\n%s\nstderr:\n%s", code, stdout, want, stderr)
	}
	if n := srv.RequestCount(apitest.DetailPath); n != 5+2*2 {
		t.Errorf("%d detail requests, want one per registered name and two per unknown one", n)
	}

	apptest.WriteSchedules(t, schedules, "hourly", "0 * * * *", apptest.NamesOf(projects))
	code, stdout, _ = runWith(t, env, "--check", "--dry-run", "--all-names")
	if lines := strings.Split(stdout, "\n"); code != ExitOK || len(lines) != 4 ||
		!strings.HasPrefix(lines[1], "api: ok ("+srv.URL+": all 6 nft names are registered projects, ") {
		t.Errorf("all registered: exit %d, stdout\n%s", code, stdout)
	}
}

// With the upstream refusing connections, --check --all-names stops asking
// as a pass does and says how many names it did not ask.
func TestCheckAllNamesStopsAskingAnUnavailableUpstream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	l.Close()
	names := apptest.NamesOf(apitest.Generate(500, 0, 32))
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	apptest.WriteSchedules(t, schedules, "hourly", "0 * * * *", names)
	env := map[string]string{
		"READSYNC_API_BASE_URL":   base,
		"READSYNC_CLIENT_ID":      apitest.DefaultClientID,
		"READSYNC_CLIENT_SECRET":  apitest.DefaultClientSecret,
		"READSYNC_SCHEDULES_FILE": schedules,
		"READSYNC_RETRY_BACKOFF":  "1ms",
		"READSYNC_RATE_LIMIT":     "0",
		"READSYNC_CONCURRENCY":    "2",
	}
	code, stdout, _ := runWith(t, env, "--check", "--dry-run", "--all-names")
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	last := lines[len(lines)-2] // before the clickhouse line
	if code != ExitFailed || len(lines) > 10 || !strings.HasPrefix(last, "api: FAILED: upstream unavailable: 5 names in a row failed with no answer from it") ||
		!strings.Contains(last, "connection refused") || !strings.Contains(last, "of 500 nft names not asked") {
		t.Errorf("exit %d, stdout\n%s", code, stdout)
	}
}
