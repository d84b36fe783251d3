package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/config"
)

// baseEnv is a valid environment; tests change one variable at a time.
func baseEnv() map[string]string {
	return map[string]string{
		"READSYNC_API_BASE_URL":   "http://127.0.0.1:1",
		"READSYNC_CLIENT_ID":      "1001",
		"READSYNC_CLIENT_SECRET":  "s3cr3t-value",
		"READSYNC_CLICKHOUSE_DSN": "clickhouse://default:pa55word@127.0.0.1:1/readsync",
		"READSYNC_SCHEDULES_FILE": "testdata/schedules.yaml",
	}
}

// tlsDSN is a valid DSN asking for native TLS.
const tlsDSN = "clickhouse://default:pa55word@127.0.0.1:1/readsync?secure=true"

func runWith(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, config.Environ(env), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestConfigErrorsExit2(t *testing.T) {
	tests := []struct {
		name string
		set  map[string]string // "" deletes
		args []string
		want string
	}{
		{"missing base url", map[string]string{"READSYNC_API_BASE_URL": ""}, []string{"--backfill"}, "readsync: configuration: READSYNC_API_BASE_URL is required: scheme and host of the API, such as https://api.example.com\n"},
		{"base url without scheme", map[string]string{"READSYNC_API_BASE_URL": "api.example.com"}, []string{"--backfill"}, `readsync: configuration: READSYNC_API_BASE_URL="api.example.com": the scheme is "", not http or https: want scheme and host only, such as https://api.example.com` + "\n"},
		{"base url ftp", map[string]string{"READSYNC_API_BASE_URL": "ftp://x"}, []string{"--backfill"}, `readsync: configuration: READSYNC_API_BASE_URL="ftp://x": the scheme is "ftp", not http or https: want scheme and host only, such as https://api.example.com` + "\n"},
		{"base url with the API's path", map[string]string{"READSYNC_API_BASE_URL": "https://host/platform/api/v1"}, []string{"--backfill"}, `readsync: configuration: READSYNC_API_BASE_URL="https://host/platform/api/v1": it has the path "/platform/api/v1"; the API's paths (/platform/api/v1/…) are added to it: want scheme and host only, such as https://api.example.com` + "\n"},
		{"base url with a query", map[string]string{"READSYNC_API_BASE_URL": "https://host?region=eu"}, []string{"--check"}, `readsync: configuration: READSYNC_API_BASE_URL="https://host?region=eu": it has the query "region=eu": want scheme and host only, such as https://api.example.com` + "\n"},
		{"base url with a fragment", map[string]string{"READSYNC_API_BASE_URL": "https://host/#v1"}, nil, `readsync: configuration: READSYNC_API_BASE_URL="https://host/#v1": it has the fragment "v1": want scheme and host only, such as https://api.example.com` + "\n"},
		{"base url with user info", map[string]string{"READSYNC_API_BASE_URL": "https://me:s3cr3t-value@host"}, []string{"--backfill"}, `readsync: configuration: READSYNC_API_BASE_URL="https://me:xxxxx@host": it has user info; the API's credentials are the client id and secret: want scheme and host only, such as https://api.example.com` + "\n"},
		{"all-names without check", nil, []string{"--all-names"}, "readsync: --all-names needs --check; run readsync --help\n"},
		{"empty client id", map[string]string{"READSYNC_CLIENT_ID": " "}, []string{"--backfill"}, `readsync: configuration: READSYNC_CLIENT_ID=" ": the API client id, not empty` + "\n"},
		{"missing client id", map[string]string{"READSYNC_CLIENT_ID": ""}, []string{"--backfill"}, "readsync: configuration: READSYNC_CLIENT_ID is required: sent as the client_id header\n"},
		{"missing secret", map[string]string{"READSYNC_CLIENT_SECRET": ""}, []string{"--backfill"}, "readsync: configuration: READSYNC_CLIENT_SECRET is required: sent as the client_secret header; never logged\n"},
		{"missing dsn", map[string]string{"READSYNC_CLICKHOUSE_DSN": ""}, []string{"--backfill"}, "readsync: configuration: READSYNC_CLICKHOUSE_DSN is required (only --backfill --dry-run and --check --dry-run run without ClickHouse): such as clickhouse://user:password@host:9000/database\n"},
		{"missing dsn for expire's dry run", map[string]string{"READSYNC_CLICKHOUSE_DSN": ""}, []string{"--expire", "--dry-run"}, "readsync: configuration: READSYNC_CLICKHOUSE_DSN is required: --expire --dry-run reads ClickHouse: such as clickhouse://user:password@host:9000/database\n"},
		{"missing dsn for verify", map[string]string{"READSYNC_CLICKHOUSE_DSN": ""}, []string{"--verify"}, "readsync: configuration: READSYNC_CLICKHOUSE_DSN is required: --verify reads ClickHouse: such as clickhouse://user:password@host:9000/database\n"},
		{"dsn without a port", map[string]string{"READSYNC_CLICKHOUSE_DSN": "clickhouse://default:pa55word@ch.example.com/readsync"}, nil, `readsync: configuration: READSYNC_CLICKHOUSE_DSN: address "ch.example.com" has no port: want host and native port, such as clickhouse://user:password@host:9000/database` + "\n"},
		{"dsn with port 0", map[string]string{"READSYNC_CLICKHOUSE_DSN": "clickhouse://default:pa55word@ch.example.com:/readsync"}, []string{"--check"}, `readsync: configuration: READSYNC_CLICKHOUSE_DSN: address "ch.example.com:" has no port: want host and native port, such as clickhouse://user:password@host:9000/database` + "\n"},
		{"http dsn", map[string]string{"READSYNC_CLICKHOUSE_DSN": "http://u:pa55word@h:8123/x"}, []string{"--backfill"}, "readsync: configuration: READSYNC_CLICKHOUSE_DSN: scheme \"http\": readsync speaks the native protocol, use clickhouse://host:9000/database\n"},
		{"ca file missing", map[string]string{"READSYNC_CLICKHOUSE_DSN": tlsDSN, "READSYNC_CLICKHOUSE_CA_FILE": "testdata/nope.pem"}, []string{"--backfill"}, "readsync: configuration: READSYNC_CLICKHOUSE_CA_FILE: CA file: open testdata/nope.pem: no such file or directory\n"},
		{"ca file missing in check", map[string]string{"READSYNC_CLICKHOUSE_DSN": tlsDSN, "READSYNC_CLICKHOUSE_CA_FILE": "testdata/nope.pem"}, []string{"--check"}, "readsync: configuration: READSYNC_CLICKHOUSE_CA_FILE: CA file: open testdata/nope.pem: no such file or directory\n"},
		{"ca file without a certificate", map[string]string{"READSYNC_CLICKHOUSE_DSN": tlsDSN, "READSYNC_CLICKHOUSE_CA_FILE": "testdata/not-a-ca.pem"}, nil, "readsync: configuration: READSYNC_CLICKHOUSE_CA_FILE: CA file testdata/not-a-ca.pem: no PEM certificate in it\n"},
		{"ca file with a plain-text dsn", map[string]string{"READSYNC_CLICKHOUSE_CA_FILE": "testdata/not-a-ca.pem"}, []string{"--backfill"}, "readsync: configuration: READSYNC_CLICKHOUSE_CA_FILE: a CA file needs a DSN with secure=true (native TLS, port 9440 by default)\n"},
		{"concurrency not a number", map[string]string{"READSYNC_CONCURRENCY": "many"}, []string{"--backfill"}, `readsync: configuration: READSYNC_CONCURRENCY="many": a whole number such as 8` + "\n"},
		{"concurrency zero", map[string]string{"READSYNC_CONCURRENCY": "0"}, []string{"--backfill"}, `readsync: configuration: READSYNC_CONCURRENCY="0": a whole number from 1 to 1024, such as 8` + "\n"},
		{"timeout not a duration", map[string]string{"READSYNC_REQUEST_TIMEOUT": "5"}, []string{"--backfill"}, `readsync: configuration: READSYNC_REQUEST_TIMEOUT="5": a Go duration such as 30s` + "\n"},
		{"timeout negative", map[string]string{"READSYNC_REQUEST_TIMEOUT": "-1s"}, []string{"--backfill"}, `readsync: configuration: READSYNC_REQUEST_TIMEOUT="-1s": a positive Go duration such as 30s` + "\n"},
		{"log level", map[string]string{"READSYNC_LOG_LEVEL": "verbose"}, []string{"--backfill"}, `readsync: configuration: READSYNC_LOG_LEVEL="verbose": one of debug, info, warn or error` + "\n"},
		{"log format", map[string]string{"READSYNC_LOG_FORMAT": "xml"}, []string{"--backfill"}, `readsync: configuration: READSYNC_LOG_FORMAT="xml": text or json, or unset` + "\n"},
		{"timezone", map[string]string{"READSYNC_SOURCE_TIMEZONE": "Mars/Olympus"}, []string{"--backfill"}, `readsync: configuration: READSYNC_SOURCE_TIMEZONE="Mars/Olympus": an IANA time zone such as UTC or Asia/Shanghai` + "\n"},
		{"batch rows", map[string]string{"READSYNC_BATCH_ROWS": "0"}, []string{"--backfill"}, `readsync: configuration: READSYNC_BATCH_ROWS="0": a whole number of at least 1, such as 50000` + "\n"},
		{"max retries negative", map[string]string{"READSYNC_MAX_RETRIES": "-1"}, []string{"--backfill"}, `readsync: configuration: READSYNC_MAX_RETRIES="-1": a whole number from 0 to 100, such as 4` + "\n"},
		{"retry backoff zero", map[string]string{"READSYNC_RETRY_BACKOFF": "0s"}, []string{"--backfill"}, `readsync: configuration: READSYNC_RETRY_BACKOFF="0s": a positive Go duration such as 500ms` + "\n"},
		{"rate limit negative", map[string]string{"READSYNC_RATE_LIMIT": "-5"}, []string{"--backfill"}, `readsync: configuration: READSYNC_RATE_LIMIT="-5": a number of requests per second such as 20, or 0 for no limit` + "\n"},
		{"rate limit not a number", map[string]string{"READSYNC_RATE_LIMIT": "fast"}, []string{"--backfill"}, `readsync: configuration: READSYNC_RATE_LIMIT="fast": a number such as 20` + "\n"},
		{"max response bytes unit", map[string]string{"READSYNC_MAX_RESPONSE_BYTES": "10MB"}, []string{"--backfill"}, `readsync: configuration: READSYNC_MAX_RESPONSE_BYTES="10MB": a size in bytes, optionally with KiB, MiB, GiB or TiB, such as 256MiB` + "\n"},
		{"max response bytes zero", map[string]string{"READSYNC_MAX_RESPONSE_BYTES": "0"}, []string{"--backfill"}, `readsync: configuration: READSYNC_MAX_RESPONSE_BYTES="0": a positive size such as 256MiB` + "\n"},
		{"spool max bytes", map[string]string{"READSYNC_SPOOL_MAX_BYTES": "-1GiB"}, []string{"--backfill"}, `readsync: configuration: READSYNC_SPOOL_MAX_BYTES="-1GiB": a size in bytes, optionally with KiB, MiB, GiB or TiB, such as 1GiB` + "\n"},
		{"spool flush interval", map[string]string{"READSYNC_SPOOL_FLUSH_INTERVAL": "soon"}, []string{"--backfill"}, `readsync: configuration: READSYNC_SPOOL_FLUSH_INTERVAL="soon": a Go duration such as 30s` + "\n"},
		{"shutdown grace negative", map[string]string{"READSYNC_SHUTDOWN_GRACE": "-1s"}, []string{"--backfill"}, `readsync: configuration: READSYNC_SHUTDOWN_GRACE="-1s": a Go duration of 0 or more, such as 30s` + "\n"},
		{"spool dir not writable", map[string]string{"READSYNC_SPOOL_DIR": "/dev/null/spool"}, []string{"--backfill"}, "READSYNC_SPOOL_DIR: spool directory /dev/null/spool"},
		{"spool dir not writable in check", map[string]string{"READSYNC_SPOOL_DIR": "/dev/null/spool"}, []string{"--check"}, "spool: FAILED: READSYNC_SPOOL_DIR: spool directory /dev/null/spool"},
		{"spool dir not writable for the daemon", map[string]string{"READSYNC_SPOOL_DIR": "/dev/null/spool"}, nil, "READSYNC_SPOOL_DIR: spool directory /dev/null/spool"},
		{"shard out of range", map[string]string{"READSYNC_SHARD": "3/3"}, []string{"--backfill"}, `readsync: configuration: READSYNC_SHARD="3/3": i/n with 0 <= i < n, such as 0/3, where i may be a pod name ending in -i, such as readsync-0/3; or a StatefulSet's pod name followed by /statefulset, such as readsync-0/statefulset, for n read from the StatefulSet's replicas` + "\n"},
		{"shard pod name beyond the count", map[string]string{"READSYNC_SHARD": "readsync-3/3"}, []string{"--backfill"}, `readsync: configuration: READSYNC_SHARD="readsync-3/3": i/n with 0 <= i < n, such as 0/3, where i may be a pod name ending in -i, such as readsync-0/3; or a StatefulSet's pod name followed by /statefulset, such as readsync-0/statefulset, for n read from the StatefulSet's replicas` + "\n"},
		{"shard not a fraction", map[string]string{"READSYNC_SHARD": "web-0"}, []string{"--backfill"}, `readsync: configuration: READSYNC_SHARD="web-0": i/n with 0 <= i < n, such as 0/3, where i may be a pod name ending in -i, such as readsync-0/3; or a StatefulSet's pod name followed by /statefulset, such as readsync-0/statefulset, for n read from the StatefulSet's replicas` + "\n"},
		{"statefulset shard without a pod name", map[string]string{"READSYNC_SHARD": "readsync/statefulset", "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}, []string{"--backfill"}, `readsync: configuration: READSYNC_SHARD="readsync/statefulset": i/n with 0 <= i < n, such as 0/3, where i may be a pod name ending in -i, such as readsync-0/3; or a StatefulSet's pod name followed by /statefulset, such as readsync-0/statefulset, for n read from the StatefulSet's replicas` + "\n"},
		{"statefulset shard outside Kubernetes", map[string]string{"READSYNC_SHARD": "readsync-0/statefulset"}, []string{"--backfill"}, `readsync: configuration: READSYNC_SHARD="readsync-0/statefulset": reads the StatefulSet's replicas from the Kubernetes API, but KUBERNETES_SERVICE_HOST="" and KUBERNETES_SERVICE_PORT="", which Kubernetes sets in every pod: run it in the StatefulSet's pod, or set READSYNC_SHARD to i/n` + "\n"},
		{"statefulset shard without a token", map[string]string{"READSYNC_SHARD": "readsync-0/statefulset", "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443", "READSYNC_SERVICEACCOUNT_DIR": "testdata/no-such-dir"}, []string{"--backfill"}, `readsync: configuration: READSYNC_SHARD="readsync-0/statefulset": READSYNC_SERVICEACCOUNT_DIR: open testdata/no-such-dir/ca.crt: no such file or directory (the pod needs automountServiceAccountToken: true)` + "\n"},
		{"schedules file missing", map[string]string{"READSYNC_SCHEDULES_FILE": "testdata/nope.yaml"}, []string{"--backfill"}, "READSYNC_SCHEDULES_FILE: schedules file: open testdata/nope.yaml"},
		{"schedules file bad cron", map[string]string{"READSYNC_SCHEDULES_FILE": "testdata/bad-cron.yaml"}, nil, `schedules file testdata/bad-cron.yaml: schedule "hourly" (schedules[0]): cron "61 * * * *"`},
		{"cluster name", map[string]string{"READSYNC_CLICKHOUSE_CLUSTER": "main cluster"}, []string{"--migrate"}, `readsync: configuration: READSYNC_CLICKHOUSE_CLUSTER="main cluster": a cluster name of the server's remote_servers, such as main_cluster (letters, digits, _ - .)` + "\n"},
		{"replica path without cluster", map[string]string{"READSYNC_CLICKHOUSE_REPLICA_PATH": "/x/{table}"}, []string{"--migrate"}, `readsync: configuration: READSYNC_CLICKHOUSE_REPLICA_PATH="/x/{table}": applies to a cluster only; set READSYNC_CLICKHOUSE_CLUSTER too, or unset it` + "\n"},
		{"replica path without table", map[string]string{"READSYNC_CLICKHOUSE_CLUSTER": "c", "READSYNC_CLICKHOUSE_REPLICA_PATH": "/clickhouse/{shard}"}, []string{"--migrate"}, `readsync: configuration: READSYNC_CLICKHOUSE_REPLICA_PATH="/clickhouse/{shard}": a ZooKeeper path starting with / and containing {table}, such as /clickhouse/tables/{shard}/{database}/{table}` + "\n"},
		{"migrate with backfill", nil, []string{"--migrate", "--backfill"}, "--migrate is a mode of its own"},
		{"verify with backfill", nil, []string{"--verify", "--backfill"}, "--verify is a mode of its own"},
		{"since without verify", nil, []string{"--since", "48h"}, "--since needs --verify"},
		{"repair without verify", nil, []string{"--repair"}, "--repair needs --verify"},
		{"since not a time", nil, []string{"--verify", "--since", "yesterday"}, `invalid value "yesterday" for flag -since: want an RFC 3339 time such as 2026-01-01T00:00:00Z, a UTC date such as 2026-01-01, or a duration before now such as 48h`},
		{"batch timeout not positive", map[string]string{"READSYNC_BATCH_TIMEOUT": "0s"}, []string{"--backfill"}, `READSYNC_BATCH_TIMEOUT="0s": a positive Go duration such as 30s`},
		{"unknown flag", nil, []string{"--backfil"}, "flag provided but not defined: -backfil"},
		{"stray argument", nil, []string{"--backfill", "alice.dmail"}, `unexpected argument "alice.dmail"`},
		{"schedule without backfill", nil, []string{"--schedule", "hourly"}, "--schedule needs --backfill"},
		{"nft without backfill", nil, []string{"--nft", "a"}, "--nft needs --backfill"},
		{"dry-run without backfill", nil, []string{"--dry-run"}, "--dry-run needs --backfill"},
		{"schedule and nft", nil, []string{"--backfill", "--schedule", "hourly", "--nft", "a"}, "--schedule and --nft"},
		{"backfill and check", nil, []string{"--backfill", "--check"}, "separate modes"},
		{"flush-spool and backfill", nil, []string{"--flush-spool", "--backfill"}, "--flush-spool is a mode of its own"},
		{"retry-quarantined without flush-spool", nil, []string{"--retry-quarantined"}, "--retry-quarantined needs --flush-spool"},
		{"retry-quarantined with backfill", nil, []string{"--backfill", "--retry-quarantined"}, "--retry-quarantined needs --flush-spool"},
		{"empty nft item", nil, []string{"--backfill", "--nft", "a,,b"}, `invalid value "a,,b" for flag -nft: empty name`},
		{"snapshot-at not rfc3339", nil, []string{"--backfill", "--snapshot-at", "2026-01-01 00:00:00"}, "invalid value \"2026-01-01 00:00:00\" for flag -snapshot-at"},
		{"snapshot-at fraction", nil, []string{"--backfill", "--snapshot-at", "2026-01-01T00:00:00.5Z"}, "whole seconds"},
		{"snapshot-at before 1970", nil, []string{"--backfill", "--snapshot-at", "1969-01-01T00:00:00Z"}, "1970 to 2106"},
		{"unknown schedule", nil, []string{"--backfill", "--schedule", "weekly"}, `--schedule "weekly": no such schedule in testdata/schedules.yaml (have "hourly", "every-ten", "shanghai")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := baseEnv()
			for k, v := range tt.set {
				if v == "" {
					delete(env, k)
				} else {
					env[k] = v
				}
			}
			code, stdout, stderr := runWith(t, env, tt.args...)
			if code != ExitConfig {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, ExitConfig, stderr)
			}
			if !strings.Contains(stdout+stderr, tt.want) {
				t.Errorf("output does not contain %q:\n%s%s", tt.want, stdout, stderr)
			}
			for _, secret := range []string{"s3cr3t-value", "pa55word"} {
				if strings.Contains(stdout+stderr, secret) {
					t.Errorf("output leaks a secret:\n%s%s", stdout, stderr)
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := runWith(t, map[string]string{}, "--version")
	if code != ExitOK || !strings.HasPrefix(stdout, "readsync ") {
		t.Errorf("--version: exit %d, output %q", code, stdout)
	}
}

// One run reports every problem, one line each, whatever their kind:
// missing or undecodable values first, then values out of range, the
// schedules file, and the misspelt name that explains a missing one.
func TestConfigErrorsAreReportedTogether(t *testing.T) {
	env := baseEnv()
	delete(env, "READSYNC_CLIENT_SECRET")
	env["READSYNC_CLIENT_SECERT"] = "s3cr3t-value"
	env["READSYNC_REQUEST_TIMEOUT"] = "5"
	env["READSYNC_CONCURRENCY"] = "0"
	env["READSYNC_SPOOL_MAX_BYTES"] = "1GB"
	env["READSYNC_SCHEDULES_FILE"] = "testdata/bad-cron.yaml"
	code, stdout, stderr := runWith(t, env, "--backfill")
	want := `readsync: configuration: READSYNC_CLIENT_SECRET is required: sent as the client_secret header; never logged
readsync: configuration: READSYNC_REQUEST_TIMEOUT="5": a Go duration such as 30s
readsync: configuration: READSYNC_SPOOL_MAX_BYTES="1GB": a size in bytes, optionally with KiB, MiB, GiB or TiB, such as 1GiB
readsync: configuration: READSYNC_CONCURRENCY="0": a whole number from 1 to 1024, such as 8
readsync: configuration: READSYNC_SCHEDULES_FILE: schedules file testdata/bad-cron.yaml: schedule "hourly" (schedules[0]): cron "61 * * * *": end of range (61) above maximum (59): 61
readsync: configuration: READSYNC_CLIENT_SECERT is not a readsync variable (did you mean READSYNC_CLIENT_SECRET?)
`
	if code != ExitConfig || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr\n%s\nwant exit 2 and\n%s", code, stdout, stderr, want)
	}
}

// A misspelt variable is a warning for a run and a failed configuration
// for --check; the variables of the project's own tests trip neither.
func TestUnknownVariableIsReported(t *testing.T) {
	srv := apitest.NewServer(apitest.WithCredentials("1001", "s3cr3t-value"), apitest.WithProjects(apitest.Project{ID: 1, NFT: "alice.dmail"}))
	t.Cleanup(srv.Close)
	env := baseEnv()
	env["READSYNC_API_BASE_URL"] = srv.URL
	env["READSYNC_TEST_CLICKHOUSE_DSN"] = "clickhouse://127.0.0.1:1/x"
	env["READSYNC_REQUIRE_CLICKHOUSE"] = "1"

	code, stdout, stderr := runWith(t, env, "--check", "--dry-run")
	if code != ExitOK || strings.Contains(stdout+stderr, "not a readsync variable") {
		t.Fatalf("--check with the tests' variables: exit %d\n%s%s", code, stdout, stderr)
	}

	env["READSYNC_CONCURENCY"] = "3"
	code, stdout, stderr = runWith(t, env, "--check", "--dry-run")
	if want := "config: FAILED: READSYNC_CONCURENCY is not a readsync variable (did you mean READSYNC_CONCURRENCY?)\n"; code != ExitConfig || stdout != want {
		t.Errorf("--check: exit %d, stdout %q; want exit 2 and %q\nstderr:\n%s", code, stdout, want, stderr)
	}

	code, _, stderr = runWith(t, env, "--backfill", "--dry-run", "--nft", "alice.dmail")
	want := `"level":"WARN","msg":"environment variable ignored: not a readsync variable","variable":"READSYNC_CONCURENCY","did_you_mean":"READSYNC_CONCURRENCY"}`
	if code != ExitOK || !strings.Contains(stderr, want) {
		t.Errorf("backfill: exit %d, want 0 and a warning %s:\n%s", code, want, stderr)
	}
}

// Every variable has a place in --help, with its default or "required"
// and its description.
func TestEveryVariableIsDescribed(t *testing.T) {
	code, stdout, _ := runWith(t, nil, "--help")
	if code != ExitOK {
		t.Fatalf("--help exit %d", code)
	}
	_, env, ok := strings.Cut(stdout, "\nEnvironment:\n")
	if !ok {
		t.Fatalf("--help lists no environment:\n%s", stdout)
	}
	for _, v := range config.Variables() {
		head := "  " + v.Name + "\n"
		switch {
		case v.Required:
			head = "  " + v.Name + " (required)\n"
		case v.Default != "":
			head = "  " + v.Name + " (default " + v.Default + ")\n"
		}
		if !strings.Contains(env, head+"    \t"+v.Help+"\n") {
			t.Errorf("--help lacks %q with its description", strings.TrimSpace(head))
		}
	}
	if !strings.Contains(env, "  READSYNC_REQUEST_TIMEOUT (default 30s)\n    \tbound on one HTTP request, body included\n") {
		t.Errorf("--help does not show READSYNC_REQUEST_TIMEOUT's default:\n%s", env)
	}
}

func TestPlainHTTPToTheNetworkIsWarnedAbout(t *testing.T) {
	env := baseEnv()
	env["READSYNC_MAX_RETRIES"] = "0"
	env["READSYNC_REQUEST_TIMEOUT"] = "2s"
	warning := `"level":"WARN","msg":"READSYNC_API_BASE_URL is plain http to a host that is not loopback: the client secret crosses the network unencrypted; use https"`
	for url, warns := range map[string]bool{"http://readsync-upstream.invalid": true, "http://127.0.0.1:1": false} {
		env["READSYNC_API_BASE_URL"] = url
		_, stdout, stderr := runWith(t, env, "--check", "--dry-run")
		if strings.Contains(stderr, warning) != warns {
			t.Errorf("%s: warning logged %t, want %t:\n%s%s", url, !warns, warns, stdout, stderr)
		}
	}
}
