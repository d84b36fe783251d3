package app

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
)

// escape starts every terminal control sequence the demo could print:
// bold headings, tint's colours, the progress bar's redraws.
const escape = "\x1b["

// `make demo` is run into logs and CI as often as on a terminal: off a
// terminal, none of its pieces prints an escape code. The pieces run here
// with pipes and buffers for output, which are not terminals.
func TestDemoPrintsNoEscapeCodesOffTerminal(t *testing.T) {
	t.Run("headings", func(t *testing.T) {
		cmd := exec.Command("bash", "-c", `source scripts/demo.sh && say "readsync --check"`)
		cmd.Dir = "../.."
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if string(out) != "\n== readsync --check\n" {
			t.Errorf("heading %q, want %q", out, "\n== readsync --check\n")
		}
	})

	t.Run("readsync", func(t *testing.T) {
		// The demo's settings: text logs, a check, then backfills.
		projects := apitest.SampleProjects()
		srv := apitest.NewServer(apitest.WithCredentials("1001", "s3cr3t-value"), apitest.WithProjects(projects...))
		t.Cleanup(srv.Close)
		env := baseEnv()
		env["READSYNC_API_BASE_URL"] = srv.URL
		env["READSYNC_LOG_FORMAT"] = "text"
		env["READSYNC_SCHEDULES_FILE"] = filepath.Join(t.TempDir(), "schedules.yaml")
		apptest.WriteSchedules(t, env["READSYNC_SCHEDULES_FILE"], "demo", "@hourly", apptest.NamesOf(projects))
		for _, args := range [][]string{{"--check", "--dry-run"}, {"--backfill", "--dry-run"}} {
			code, stdout, stderr := runWith(t, env, args...)
			if code != ExitOK {
				t.Fatalf("%s: exit %d:\n%s%s", args, code, stdout, stderr)
			}
			if strings.Contains(stdout+stderr, escape) {
				t.Errorf("%s prints escape codes off a terminal:\n%q", args, stderr)
			}
		}
	})

	t.Run("tables", func(t *testing.T) {
		if os.Getenv("READSYNC_TEST_CLICKHOUSE_DSN") == "" {
			t.Skip("no ClickHouse (set READSYNC_TEST_CLICKHOUSE_DSN)")
		}
		cmd := exec.Command("scripts/clickhouse.sh", "query", "SELECT 1 AS x FORMAT PrettyCompactMonoBlock")
		cmd.Dir = "../.."
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v:\n%s", err, stderr.String())
		}
		if !strings.Contains(stdout.String(), "x") || strings.Contains(stdout.String(), escape) {
			t.Errorf("query output %q: want a table without escape codes", stdout.String())
		}
	})
}
