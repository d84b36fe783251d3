package app

import (
	"fmt"
	"strings"
	"testing"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/config"
)

// A usage error is one line on stderr, which says what was wrong and where
// the rest is, and exit 2; nothing on stdout.
func TestUsageErrorIsOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--backfil"}, "readsync: flag provided but not defined: -backfil; run readsync --help\n"},
		{[]string{"-x"}, "readsync: flag provided but not defined: -x; run readsync --help\n"},
		{[]string{"--backfill", "--schedule"}, "readsync: flag needs an argument: -schedule; run readsync --help\n"},
		{[]string{"--verify", "--since", "soon"}, `readsync: invalid value "soon" for flag -since: want an RFC 3339 time such as 2026-01-01T00:00:00Z, a UTC date such as 2026-01-01, or a duration before now such as 48h; run readsync --help` + "\n"},
		{[]string{"--check=maybe"}, `readsync: invalid boolean value "maybe" for -check: parse error; run readsync --help` + "\n"},
		{[]string{"--backfill", "alice.dmail"}, `readsync: unexpected argument "alice.dmail"; run readsync --help` + "\n"},
		{[]string{"--all-names"}, "readsync: --all-names needs --check; run readsync --help\n"},
		{[]string{"--verify", "--migrate"}, "readsync: --verify is a mode of its own; give it alone, with --since or --repair; run readsync --help\n"},
		{[]string{"--failing-names", "--expire"}, "readsync: --expire is a mode of its own; give it alone, or with --dry-run; run readsync --help\n"},
		{[]string{"--dry-run"}, "readsync: --dry-run needs --backfill (or --check, to skip ClickHouse, or --expire, to print what it would drop); run readsync --help\n"},
	} {
		code, stdout, stderr := runWith(t, baseEnv(), c.args...)
		if code != ExitConfig || stdout != "" || stderr != c.want {
			t.Errorf("readsync %s: exit %d, stdout %q, stderr\n  %q\nwant exit 2, nothing on stdout, and\n  %q", strings.Join(c.args, " "), code, stdout, stderr, c.want)
		}
	}
}

// -h and --help answer on stdout, so that readsync --help | less shows
// them, exit 0, and end with the exit codes; they read no environment.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help", "--h"} {
		code, stdout, stderr := runWith(t, map[string]string{}, arg)
		if code != ExitOK || stderr != "" {
			t.Errorf("readsync %s: exit %d, stderr %q; want 0 and nothing", arg, code, stderr)
		}
		if !strings.HasPrefix(stdout, "Usage: readsync [flags]\n") {
			t.Errorf("readsync %s: stdout does not start with the usage:\n%s", arg, stdout)
		}
		for _, want := range []string{"\n  -backfill\n", "\n  -migrate\n", "\nEnvironment:\n  READSYNC_API_BASE_URL (required)\n"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("readsync %s: no %q in\n%s", arg, want, stdout)
			}
		}
		_, codes, ok := strings.Cut(stdout, "\nExit codes:\n")
		if !ok {
			t.Fatalf("readsync %s: no section of exit codes:\n%s", arg, stdout)
		}
		lines := strings.Split(strings.TrimSuffix(codes, "\n"), "\n")
		for i, code := range []int{ExitOK, ExitFailed, ExitConfig, ExitSpooled} {
			if i >= len(lines) || !strings.HasPrefix(lines[i], fmt.Sprintf("  %d  ", code)) {
				t.Errorf("readsync %s: exit codes section\n%s\nwant a line for %d at %d", arg, codes, code, i)
			}
		}
		if len(lines) != 4 {
			t.Errorf("readsync %s: exit codes section has %d lines, want 4 (and nothing after it):\n%s", arg, len(lines), codes)
		}
	}
}

// serviceLinks are the variables Kubernetes gives every pod of a namespace
// with a Service named readsync (port 9090, named http), unless the pod
// turns service links off.
func serviceLinks() map[string]string {
	return map[string]string{
		"READSYNC_SERVICE_HOST":        "10.96.12.7",
		"READSYNC_SERVICE_PORT":        "9090",
		"READSYNC_SERVICE_PORT_HTTP":   "9090",
		"READSYNC_PORT":                "tcp://10.96.12.7:9090",
		"READSYNC_PORT_9090_TCP":       "tcp://10.96.12.7:9090",
		"READSYNC_PORT_9090_TCP_PROTO": "tcp",
		"READSYNC_PORT_9090_TCP_PORT":  "9090",
		"READSYNC_PORT_9090_TCP_ADDR":  "10.96.12.7",
	}
}

// The modes that read only ClickHouse run with its DSN alone: no API
// credentials, no schedules file, in a pod that has service links.
func TestReadOnlyModesNeedOnlyTheDSN(t *testing.T) {
	f := newFixture(t, []string{"p.eth"})
	env := serviceLinks()
	env["READSYNC_CLICKHOUSE_DSN"] = f.Env["READSYNC_CLICKHOUSE_DSN"]
	env["READSYNC_LOG_FORMAT"] = "json"
	for _, c := range []struct {
		args []string
		out  string
	}{
		{[]string{"--migrate"}, "at schema version "},
		{[]string{"--verify"}, "verify: "},
		{[]string{"--failing-names"}, ""},
		{[]string{"--expire", "--dry-run"}, "expire: raw rows are kept forever\n"},
		{[]string{"--expire"}, "expire: raw rows are kept forever\n"},
		{[]string{"--failing-names", "--schedule", "hourly", "--json"}, ""},
	} {
		var stdout, stderr strings.Builder
		code := run(t.Context(), c.args, config.Environ(env), &stdout, &stderr)
		f.NoSecrets(t, stdout.String()+stderr.String())
		if code != ExitOK || !strings.Contains(stdout.String(), c.out) {
			t.Errorf("readsync %s with only a DSN: exit %d, want 0 and %q on stdout:\n%s%s", strings.Join(c.args, " "), code, c.out, stdout.String(), stderr.String())
		}
		if strings.Contains(stderr.String(), "not a readsync variable") {
			t.Errorf("readsync %s: service links reported:\n%s", strings.Join(c.args, " "), stderr.String())
		}
	}
	// The modes that call the API still say what they lack, each at once.
	var stdout, stderr strings.Builder
	code := run(t.Context(), []string{"--backfill"}, config.Environ(env), &stdout, &stderr)
	want := "readsync: configuration: READSYNC_API_BASE_URL is required: scheme and host of the API, such as https://api.example.com\n" +
		"readsync: configuration: READSYNC_CLIENT_ID is required: sent as the client_id header\n" +
		"readsync: configuration: READSYNC_CLIENT_SECRET is required: sent as the client_secret header; never logged\n" +
		"readsync: configuration: READSYNC_SCHEDULES_FILE: schedules file: open schedules.yaml: no such file or directory\n"
	if code != ExitConfig || stderr.String() != want {
		t.Errorf("--backfill with only a DSN: exit %d, stderr\n%s\nwant exit 2 and\n%s", code, stderr.String(), want)
	}
}

// A pod of hand-written manifests with service links on: the daemon's
// configuration is checked clean, without a word on the links.
func TestServiceLinksInAPod(t *testing.T) {
	srv := apitest.NewServer(apitest.WithCredentials("1001", "s3cr3t-value"), apitest.WithProjects(apitest.Project{ID: 1, NFT: "alice.dmail"}))
	t.Cleanup(srv.Close)
	env := baseEnv()
	env["READSYNC_API_BASE_URL"] = srv.URL
	for k, v := range serviceLinks() {
		env[k] = v
	}
	code, stdout, stderr := runWith(t, env, "--check", "--dry-run")
	if code != ExitOK || strings.Contains(stdout+stderr, "not a readsync variable") || !strings.Contains(stdout, "config: ok") {
		t.Errorf("--check in a pod with service links: exit %d, want 0 and config ok:\n%s%s", code, stdout, stderr)
	}
}
