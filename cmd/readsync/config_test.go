package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sethvargo/go-envconfig"
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
	code := run(context.Background(), args, envconfig.MapLookuper(env), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestConfigErrorsExit2(t *testing.T) {
	tests := []struct {
		name string
		set  map[string]string // "" deletes
		args []string
		want string
	}{
		{"missing base url", map[string]string{"READSYNC_API_BASE_URL": ""}, []string{"--backfill"}, "READSYNC_API_BASE_URL"},
		{"base url without scheme", map[string]string{"READSYNC_API_BASE_URL": "api.example.com"}, []string{"--backfill"}, `READSYNC_API_BASE_URL: base URL "api.example.com": scheme must be http or https`},
		{"base url ftp", map[string]string{"READSYNC_API_BASE_URL": "ftp://x"}, []string{"--backfill"}, "READSYNC_API_BASE_URL"},
		{"missing client id", map[string]string{"READSYNC_CLIENT_ID": ""}, []string{"--backfill"}, "READSYNC_CLIENT_ID"},
		{"missing secret", map[string]string{"READSYNC_CLIENT_SECRET": ""}, []string{"--backfill"}, "READSYNC_CLIENT_SECRET"},
		{"missing dsn", map[string]string{"READSYNC_CLICKHOUSE_DSN": ""}, []string{"--backfill"}, "READSYNC_CLICKHOUSE_DSN is required"},
		{"http dsn", map[string]string{"READSYNC_CLICKHOUSE_DSN": "http://u:pa55word@h:8123/x"}, []string{"--backfill"}, "READSYNC_CLICKHOUSE_DSN: scheme \"http\""},
		{"ca file missing", map[string]string{"READSYNC_CLICKHOUSE_DSN": tlsDSN, "READSYNC_CLICKHOUSE_CA_FILE": "testdata/nope.pem"}, []string{"--backfill"}, "READSYNC_CLICKHOUSE_CA_FILE: CA file: open testdata/nope.pem: no such file"},
		{"ca file missing in check", map[string]string{"READSYNC_CLICKHOUSE_DSN": tlsDSN, "READSYNC_CLICKHOUSE_CA_FILE": "testdata/nope.pem"}, []string{"--check"}, "READSYNC_CLICKHOUSE_CA_FILE: CA file: open testdata/nope.pem"},
		{"ca file without a certificate", map[string]string{"READSYNC_CLICKHOUSE_DSN": tlsDSN, "READSYNC_CLICKHOUSE_CA_FILE": "testdata/not-a-ca.pem"}, nil, "READSYNC_CLICKHOUSE_CA_FILE: CA file testdata/not-a-ca.pem: no PEM certificate in it"},
		{"ca file with a plain-text dsn", map[string]string{"READSYNC_CLICKHOUSE_CA_FILE": "testdata/not-a-ca.pem"}, []string{"--backfill"}, "READSYNC_CLICKHOUSE_CA_FILE: a CA file needs a DSN with secure=true"},
		{"concurrency not a number", map[string]string{"READSYNC_CONCURRENCY": "many"}, []string{"--backfill"}, `READSYNC_CONCURRENCY: strconv.ParseInt: parsing "many"`},
		{"concurrency zero", map[string]string{"READSYNC_CONCURRENCY": "0"}, []string{"--backfill"}, "READSYNC_CONCURRENCY 0: must be between 1 and 1024"},
		{"timeout not a duration", map[string]string{"READSYNC_REQUEST_TIMEOUT": "30"}, []string{"--backfill"}, `READSYNC_REQUEST_TIMEOUT: time: missing unit in duration "30"`},
		{"timeout negative", map[string]string{"READSYNC_REQUEST_TIMEOUT": "-1s"}, []string{"--backfill"}, "READSYNC_REQUEST_TIMEOUT -1s: must be positive"},
		{"log level", map[string]string{"READSYNC_LOG_LEVEL": "verbose"}, []string{"--backfill"}, `READSYNC_LOG_LEVEL "verbose"`},
		{"log format", map[string]string{"READSYNC_LOG_FORMAT": "xml"}, []string{"--backfill"}, `READSYNC_LOG_FORMAT "xml"`},
		{"timezone", map[string]string{"READSYNC_SOURCE_TIMEZONE": "Mars/Olympus"}, []string{"--backfill"}, `READSYNC_SOURCE_TIMEZONE "Mars/Olympus"`},
		{"batch rows", map[string]string{"READSYNC_BATCH_ROWS": "0"}, []string{"--backfill"}, "READSYNC_BATCH_ROWS 0"},
		{"max retries negative", map[string]string{"READSYNC_MAX_RETRIES": "-1"}, []string{"--backfill"}, "READSYNC_MAX_RETRIES -1: must be between 0 and 100"},
		{"retry backoff zero", map[string]string{"READSYNC_RETRY_BACKOFF": "0s"}, []string{"--backfill"}, "READSYNC_RETRY_BACKOFF 0s: must be positive"},
		{"rate limit negative", map[string]string{"READSYNC_RATE_LIMIT": "-5"}, []string{"--backfill"}, "READSYNC_RATE_LIMIT -5"},
		{"rate limit not a number", map[string]string{"READSYNC_RATE_LIMIT": "fast"}, []string{"--backfill"}, "READSYNC_RATE_LIMIT: "},
		{"max response bytes unit", map[string]string{"READSYNC_MAX_RESPONSE_BYTES": "10MB"}, []string{"--backfill"}, `READSYNC_MAX_RESPONSE_BYTES: size "10MB": want a whole number of bytes`},
		{"max response bytes zero", map[string]string{"READSYNC_MAX_RESPONSE_BYTES": "0"}, []string{"--backfill"}, "READSYNC_MAX_RESPONSE_BYTES 0: must be positive"},
		{"spool max bytes", map[string]string{"READSYNC_SPOOL_MAX_BYTES": "-1GiB"}, []string{"--backfill"}, "READSYNC_SPOOL_MAX_BYTES: size"},
		{"spool flush interval", map[string]string{"READSYNC_SPOOL_FLUSH_INTERVAL": "soon"}, []string{"--backfill"}, "READSYNC_SPOOL_FLUSH_INTERVAL: time: invalid duration"},
		{"shutdown grace negative", map[string]string{"READSYNC_SHUTDOWN_GRACE": "-1s"}, []string{"--backfill"}, "READSYNC_SHUTDOWN_GRACE -1s: must not be negative"},
		{"spool dir not writable", map[string]string{"READSYNC_SPOOL_DIR": "/dev/null/spool"}, []string{"--backfill"}, "READSYNC_SPOOL_DIR: spool directory /dev/null/spool"},
		{"spool dir not writable in check", map[string]string{"READSYNC_SPOOL_DIR": "/dev/null/spool"}, []string{"--check"}, "spool: FAILED: READSYNC_SPOOL_DIR: spool directory /dev/null/spool"},
		{"spool dir not writable for the daemon", map[string]string{"READSYNC_SPOOL_DIR": "/dev/null/spool"}, nil, "READSYNC_SPOOL_DIR: spool directory /dev/null/spool"},
		{"shard out of range", map[string]string{"READSYNC_SHARD": "3/3"}, []string{"--backfill"}, `READSYNC_SHARD: shard "3/3": want 0 <= i < n`},
		{"shard not a fraction", map[string]string{"READSYNC_SHARD": "web-0"}, []string{"--backfill"}, `READSYNC_SHARD: shard "web-0": want i/n`},
		{"schedules file missing", map[string]string{"READSYNC_SCHEDULES_FILE": "testdata/nope.yaml"}, []string{"--backfill"}, "READSYNC_SCHEDULES_FILE: schedules file: open testdata/nope.yaml"},
		{"schedules file bad cron", map[string]string{"READSYNC_SCHEDULES_FILE": "testdata/bad-cron.yaml"}, nil, `schedules file testdata/bad-cron.yaml: schedule "hourly" (schedules[0]): cron "61 * * * *"`},
		{"cluster name", map[string]string{"READSYNC_CLICKHOUSE_CLUSTER": "main cluster"}, []string{"--migrate"}, `READSYNC_CLICKHOUSE_CLUSTER "main cluster": a cluster name of remote_servers`},
		{"replica path without cluster", map[string]string{"READSYNC_CLICKHOUSE_REPLICA_PATH": "/x/{table}"}, []string{"--migrate"}, "READSYNC_CLICKHOUSE_REPLICA_PATH is set but READSYNC_CLICKHOUSE_CLUSTER is not"},
		{"replica path without table", map[string]string{"READSYNC_CLICKHOUSE_CLUSTER": "c", "READSYNC_CLICKHOUSE_REPLICA_PATH": "/clickhouse/{shard}"}, []string{"--migrate"}, `READSYNC_CLICKHOUSE_REPLICA_PATH "/clickhouse/{shard}": a ZooKeeper path starting with / and containing {table}`},
		{"migrate with backfill", nil, []string{"--migrate", "--backfill"}, "--migrate is a mode of its own"},
		{"unknown flag", nil, []string{"--backfil"}, "flag provided but not defined: -backfil"},
		{"stray argument", nil, []string{"--backfill", "alice.dmail"}, `unexpected argument "alice.dmail"`},
		{"schedule without backfill", nil, []string{"--schedule", "hourly"}, "--schedule needs --backfill"},
		{"nft without backfill", nil, []string{"--nft", "a"}, "--nft needs --backfill"},
		{"dry-run without backfill", nil, []string{"--dry-run"}, "--dry-run needs --backfill"},
		{"schedule and nft", nil, []string{"--backfill", "--schedule", "hourly", "--nft", "a"}, "--schedule and --nft"},
		{"backfill and check", nil, []string{"--backfill", "--check"}, "separate modes"},
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
			if code != exitConfig {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, exitConfig, stderr)
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

func TestDryRunNeedsNoDSN(t *testing.T) {
	env := baseEnv()
	delete(env, "READSYNC_CLICKHOUSE_DSN")
	cfg, err := loadConfig(context.Background(), envconfig.MapLookuper(env), false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Concurrency != 8 || cfg.RequestTimeout.String() != "30s" || cfg.LogLevel.String() != "INFO" || cfg.Location.String() != "UTC" ||
		cfg.MaxRetries != 4 || cfg.RateLimit != 20 || cfg.MaxResponseBytes != 256<<20 || cfg.SpoolDir != "./spool" ||
		cfg.SpoolMaxBytes != 1<<30 || cfg.ShutdownGrace.String() != "30s" || cfg.HTTPAddr != ":9090" {
		t.Errorf("defaults not applied: %+v", cfg.env)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := secret("hunter2")
	for _, got := range []string{s.String(), s.GoString(), s.LogValue().String()} {
		if strings.Contains(got, "hunter2") {
			t.Errorf("secret printed as %q", got)
		}
	}
	var b bytes.Buffer
	log := newLogger(&b, -4, "json")
	log.Info("config", "secret", s, "env", env{ClientSecret: s})
	if strings.Contains(b.String(), "hunter2") {
		t.Errorf("log leaks the secret: %s", b.String())
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := runWith(t, map[string]string{}, "--version")
	if code != exitOK || !strings.HasPrefix(stdout, "readsync ") {
		t.Errorf("--version: exit %d, output %q", code, stdout)
	}
}

func TestCronLoggerSurfacesSkips(t *testing.T) {
	var b bytes.Buffer
	l := cronLogger{newLogger(&b, 0, "json")}
	l.Info("wake", "now", 1)
	l.Info("skip")
	out := b.String()
	if strings.Contains(out, "wake") {
		t.Errorf("scheduler chatter logged at info: %s", out)
	}
	if !strings.Contains(out, `"level":"WARN","msg":"pass skipped`) {
		t.Errorf("a skipped tick is not logged as a warning: %s", out)
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1024", 1024, true},
		{"64KiB", 64 << 10, true},
		{"256MiB", 256 << 20, true},
		{"1 GiB", 1 << 30, true},
		{"2TiB", 2 << 40, true},
		{"10B", 10, true},
		{"1.5GiB", 0, false},
		{"1GB", 0, false},
		{"-1", 0, false},
		{"", 0, false},
		{"9999999999TiB", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var b byteSize
			err := b.EnvDecode(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("EnvDecode(%q) error %v, want ok=%t", tt.in, err, tt.ok)
			}
			if tt.ok && int64(b) != tt.want {
				t.Errorf("EnvDecode(%q) = %d, want %d", tt.in, b, tt.want)
			}
		})
	}
}
