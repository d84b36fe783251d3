package app

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/sink/sinktest"
)

// A ClickHouse that answers but refuses is not an outage. A user without
// DDL rights, a setting the server does not know, a wrong password and an
// unknown user are each reported as a refusal, with what to do, by the log,
// --check, /readyz and the delivery metric; the rows wait in the spool and
// all arrive once the cause is gone.
func TestRefusalIsNotAnOutage(t *testing.T) {
	const checkLogin = "check the user and the password in READSYNC_CLICKHOUSE_DSN"
	for _, tc := range []struct {
		name string
		dsn  func(t *testing.T, f *fixture) string
		fix  string
		// login is set for the cases whose login the server refuses.
		login bool
	}{
		{"user without DDL rights", func(t *testing.T, f *fixture) string { return f.DB.ReaderDSN(t) }, "lacks a right readsync needs", false},
		{"a setting the server does not know", func(_ *testing.T, f *fixture) string { return f.DB.DSN + "?readsync_no_such_setting=1" }, "the server does not know a setting", false},
		{"a wrong password", func(t *testing.T, f *fixture) string {
			return withUser(t, f.DB.DSN, url.UserPassword("default", "not-the-password"))
		}, checkLogin, true},
		{"an unknown user", func(t *testing.T, f *fixture) string { return withUser(t, f.DB.DSN, url.User("readsync_no_such_user")) }, checkLogin, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.login {
				sinktest.Require(t, sinktest.SurvivesFailedLogin)
			}
			projects := apitest.Generate(4, 3, 21)
			f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
			good := f.Env["READSYNC_CLICKHOUSE_DSN"]
			f.Env["READSYNC_CLICKHOUSE_DSN"] = tc.dsn(t, f)

			code, _, stderr := f.run(t, "--backfill")
			if code != ExitSpooled {
				t.Errorf("backfill exit %d, want %d (rows spooled); log:\n%s", code, ExitSpooled, stderr)
			}
			for _, want := range []string{`"level":"ERROR","msg":"ClickHouse refused a migration; rows will be spooled until that is fixed"`, tc.fix} {
				if !strings.Contains(stderr, want) {
					t.Errorf("backfill log lacks %q:\n%s", want, stderr)
				}
			}
			if strings.Contains(stderr, "unavailable") {
				t.Errorf("backfill log calls a refusal an outage:\n%s", stderr)
			}
			if tc.login && strings.Contains(stderr, "lacks a right") {
				t.Errorf("backfill log asks for a right when the login failed:\n%s", stderr)
			}

			code, stdout, _ := f.run(t, "--check")
			if code != ExitFailed || !regexp.MustCompile(`(?m)^clickhouse: FAILED: .*ClickHouse refused: .*; to fix: .*`+regexp.QuoteMeta(tc.fix)).MatchString(stdout) {
				t.Errorf("--check: exit %d, want %d with the refusal and its fix:\n%s", code, ExitFailed, stdout)
			}

			log, stop := f.startDaemon(t)
			base := apptest.ListenerURL(t, log.String)
			apptest.Eventually(t, "readiness naming the refusal", func() bool {
				code, body := apptest.Get(t, base, "/readyz")
				return code == http.StatusServiceUnavailable && strings.Contains(body, "ClickHouse refused: ") && strings.Contains(body, tc.fix)
			}, log.String)
			_, metrics := apptest.Get(t, base, "/metrics")
			for _, want := range []string{
				`readsync_delivery_state{state="refused"} 1`,
				`readsync_delivery_state{state="unavailable"} 0`,
				"readsync_last_delivery_timestamp_seconds 0",
			} {
				if !strings.Contains(metrics, want+"\n") {
					t.Errorf("metrics lack %q:\n%s", want, metrics)
				}
			}
			if code := stop(); code != ExitOK {
				t.Errorf("daemon exit %d", code)
			}

			// Nothing lost: with the cause gone, the spool delivers every row,
			// and the pass's record says what the server refused.
			f.Env["READSYNC_CLICKHOUSE_DSN"] = good
			if code, _, stderr := f.run(t, "--flush-spool"); code != ExitOK {
				t.Fatalf("--flush-spool exit %d:\n%s", code, stderr)
			}
			if n := f.DB.Count(t, "message_read_snapshots"); n != 12 {
				t.Errorf("%d snapshots after the spool was flushed, want 12", n)
			}
			var runErr string
			f.Query(t, "SELECT error FROM {db}.sync_runs", &runErr)
			if !strings.Contains(runErr, "12 rows spooled: ClickHouse refused them: ") && !strings.Contains(runErr, "rows spooled: ClickHouse refused them: ") {
				t.Errorf("sync_runs.error = %q, want it to say what ClickHouse refused", runErr)
			}
		})
	}
}

// withUser is dsn logging in as user instead.
func withUser(t *testing.T, dsn string, user *url.Userinfo) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = user
	return u.String()
}
