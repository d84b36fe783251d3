package config

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// validEnv is a valid environment with a schedules file of one schedule;
// tests change one variable at a time.
func validEnv(t *testing.T) Environ {
	t.Helper()
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	doc := "schedules:\n  - name: hourly\n    cron: \"0 * * * *\"\n    nft_names: [alice.dmail]\n"
	if err := os.WriteFile(schedules, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return Environ{
		"READSYNC_API_BASE_URL":   "http://127.0.0.1:1",
		"READSYNC_CLIENT_ID":      "1001",
		"READSYNC_CLIENT_SECRET":  "s3cr3t-value",
		"READSYNC_CLICKHOUSE_DSN": "clickhouse://default:pa55word@127.0.0.1:1/readsync",
		"READSYNC_SCHEDULES_FILE": schedules,
	}
}

func TestDryRunNeedsNoDSN(t *testing.T) {
	env := validEnv(t)
	delete(env, "READSYNC_CLICKHOUSE_DSN")
	cfg, err := Load(context.Background(), env, Needs{API: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Concurrency != 8 || cfg.RequestTimeout.String() != "30s" || cfg.LogLevel.String() != "INFO" || cfg.Location.String() != "UTC" ||
		cfg.MaxRetries != 4 || cfg.RateLimit != 20 || cfg.MaxResponseBytes != 256<<20 || cfg.SpoolDir != "./spool" ||
		cfg.SpoolMaxBytes != 1<<30 || cfg.ShutdownGrace.String() != "30s" || cfg.HTTPAddr != ":9090" {
		t.Errorf("defaults not applied: %+v", cfg.Env)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := Secret("hunter2")
	for _, got := range []string{s.String(), s.GoString(), s.LogValue().String()} {
		if strings.Contains(got, "hunter2") {
			t.Errorf("secret printed as %q", got)
		}
	}
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	log.Info("config", "secret", s, "env", Env{ClientSecret: s}, "config", &Config{Env: Env{ClientSecret: s, ClickHouseDSN: s}})
	if strings.Contains(b.String(), "hunter2") {
		t.Errorf("log leaks the secret: %s", b.String())
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
			var b ByteSize
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

func TestUnknownVariables(t *testing.T) {
	tests := []struct {
		name string
		want []UnknownVariable
	}{
		{"READSYNC_CONCURENCY", []UnknownVariable{{"READSYNC_CONCURENCY", "READSYNC_CONCURRENCY"}}},
		{"READSYNC_REQUEST_TIMEOUTS", []UnknownVariable{{"READSYNC_REQUEST_TIMEOUTS", "READSYNC_REQUEST_TIMEOUT"}}},
		{"READSYNC_CLICKHOUSE_PASSWORD", []UnknownVariable{{"READSYNC_CLICKHOUSE_PASSWORD", ""}}},
		{"READSYNC_CONCURRENCY", nil},
		{"READSYNC_TEST_CLICKHOUSE_DSN", nil},
		{"READSYNC_TEST_ANYTHING_NEW", nil},
		{"READSYNC_REQUIRE_CLICKHOUSE", nil},
		{"READSYNC_NO_INSTALL", nil},
		{"READSYNC_CLICKHOUSE_TCP_PORT", nil},
		{"GOGC", nil},
		{"readsync_concurrency", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unknownVariables(Environ{tt.name: "1"}); !slices.Equal(got, tt.want) {
				t.Errorf("unknownVariables(%s) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

func TestSendsSecretInClear(t *testing.T) {
	tests := []struct {
		url  string
		want bool
	}{
		{"http://api.example.com", true},
		{"http://10.0.0.7:8080", true},
		{"http://[2001:db8::1]:80", true},
		{"http://127.0.0.1:8080", false},
		{"http://127.8.9.10", false},
		{"http://[::1]:8080", false},
		{"http://[::ffff:127.0.0.1]:8080", false},
		{"http://localhost:8080", false},
		{"http://LocalHost", false},
		{"http://localhost.example.com", true},
		{"https://api.example.com", false},
		{"https://10.0.0.7", false},
	}
	for _, tt := range tests {
		if got := SendsSecretInClear(tt.url); got != tt.want {
			t.Errorf("SendsSecretInClear(%s) = %t, want %t", tt.url, got, tt.want)
		}
	}
}

// The variables the project's scripts and tests read are either
// readsync's or known as the tools' own, so that setting them never looks
// like a typo.
func TestToolVariablesAreNoTypos(t *testing.T) {
	used := regexp.MustCompile(`READSYNC_[A-Z0-9_]*[A-Z0-9]`)
	for _, file := range []string{"../../Makefile", "../../.ci/run", "../../scripts/clickhouse.sh", "../../scripts/lib/server.sh", "../../scripts/demo.sh", "../../sink/sinktest/sinktest.go"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range used.FindAllString(string(b), -1) {
			if got := unknownVariables(Environ{name: ""}); len(got) > 0 {
				t.Errorf("%s reads %s, which readsync would call %s", file, name, got[0])
			}
		}
	}
}

// Every variable is a field with an env tag naming a READSYNC_ variable
// (or one Kubernetes sets) and a one-line help tag.
func TestEveryVariableHasANameAndHelp(t *testing.T) {
	for _, v := range variables() {
		setByKubernetes := v.Name == "KUBERNETES_SERVICE_HOST" || v.Name == "KUBERNETES_SERVICE_PORT"
		if !(strings.HasPrefix(v.Name, "READSYNC_") || setByKubernetes) || v.Help == "" || strings.Contains(v.Help, "\n") {
			t.Errorf("field %s: env name %q, help %q; want a READSYNC_ name and a one-line help tag", v.field.Name, v.Name, v.Help)
		}
	}
}

// A pod gets variables for every Service of its namespace unless service
// links are off; those of a Service named readsync, or readsync-…, start
// with readsync's prefix and are no typo. These are what Kubernetes sets
// for the Services readsync (a named port) and readsync-pods (an unnamed
// one, on IPv6), and for a UDP port.
func TestServiceLinksAreNotReported(t *testing.T) {
	links := map[string]string{
		"READSYNC_SERVICE_HOST":        "10.96.12.7",
		"READSYNC_SERVICE_PORT":        "9090",
		"READSYNC_SERVICE_PORT_HTTP":   "9090",
		"READSYNC_PORT":                "tcp://10.96.12.7:9090",
		"READSYNC_PORT_9090_TCP":       "tcp://10.96.12.7:9090",
		"READSYNC_PORT_9090_TCP_PROTO": "tcp",
		"READSYNC_PORT_9090_TCP_PORT":  "9090",
		"READSYNC_PORT_9090_TCP_ADDR":  "10.96.12.7",

		"READSYNC_PODS_SERVICE_HOST":        "fd00::2a",
		"READSYNC_PODS_SERVICE_PORT":        "9090",
		"READSYNC_PODS_PORT":                "tcp://[fd00::2a]:9090",
		"READSYNC_PODS_PORT_9090_TCP":       "tcp://[fd00::2a]:9090",
		"READSYNC_PODS_PORT_9090_TCP_PROTO": "tcp",
		"READSYNC_PODS_PORT_9090_TCP_PORT":  "9090",
		"READSYNC_PODS_PORT_9090_TCP_ADDR":  "fd00::2a",

		"READSYNC_STATSD_SERVICE_PORT_METRICS_UDP": "8125",
		"READSYNC_STATSD_PORT_8125_UDP":            "udp://10.96.12.8:8125",
		"READSYNC_STATSD_PORT_8125_UDP_PROTO":      "udp",
	}
	// What only looks like one: each is still reported.
	typos := map[string]string{
		"READSYNC_CLICKHOUSE_PORT":     "9000",
		"READSYNC_SERVICE_HOST_NAME":   "10.96.12.7",
		"READSYNC_PORT_9090_TCP_PORT":  "9091",
		"READSYNC_STATSD_SERVICE_HOST": "statsd.example.com",
		"READSYNC_PORT_9090_UDP":       "tcp://10.96.12.7:9090",
		"READSYNC_PORT_9090_TCP_PROTO": "udp",
		"READSYNC_PODS_SERVICE_PORT":   "http",
	}
	env := validEnv(t)
	for k, v := range links {
		env[k] = v
	}
	cfg, err := Load(context.Background(), env, Needs{API: true, DSN: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Unknown) != 0 {
		t.Errorf("service links reported as unknown: %v", cfg.Unknown)
	}
	for k, v := range typos {
		env := validEnv(t)
		env[k] = v
		cfg, err := Load(context.Background(), env, Needs{API: true, DSN: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Unknown) != 1 || cfg.Unknown[0].Name != k {
			t.Errorf("%s=%s: unknown %v, want it reported", k, v, cfg.Unknown)
		}
	}
}

// The modes that read only ClickHouse need only its settings; the others
// keep requiring the API's, and the DSN's message names the mode.
func TestNeeds(t *testing.T) {
	onlyDSN := Environ{"READSYNC_CLICKHOUSE_DSN": "clickhouse://default:pa55word@127.0.0.1:1/readsync"}
	cfg, err := Load(context.Background(), onlyDSN, Needs{DSN: true, Mode: "--verify"})
	if err != nil {
		t.Fatalf("--verify with only a DSN: %v", err)
	}
	if cfg.Schedules != nil || cfg.DSN.Password() != "pa55word" {
		t.Errorf("schedules %v: want no schedules file read, and the DSN parsed", cfg.Schedules)
	}
	for _, c := range []struct {
		name  string
		env   Environ
		needs Needs
		want  string
	}{
		{"no DSN for --expire --dry-run", Environ{}, Needs{DSN: true, Mode: "--expire --dry-run"},
			"READSYNC_CLICKHOUSE_DSN is required: --expire --dry-run reads ClickHouse: such as clickhouse://user:password@host:9000/database"},
		{"no DSN for the daemon", validEnvWithout(t, "READSYNC_CLICKHOUSE_DSN"), Needs{API: true, DSN: true},
			"READSYNC_CLICKHOUSE_DSN is required (only --backfill --dry-run and --check --dry-run run without ClickHouse): such as clickhouse://user:password@host:9000/database"},
		{"a schedules file named but missing", Environ{"READSYNC_CLICKHOUSE_DSN": "clickhouse://default:pa55word@127.0.0.1:1/readsync", "READSYNC_SCHEDULES_FILE": "no-such-file.yaml"},
			Needs{DSN: true, Mode: "--failing-names"}, "READSYNC_SCHEDULES_FILE: schedules file: open no-such-file.yaml: no such file or directory"},
		{"a base URL set but wrong", Environ{"READSYNC_CLICKHOUSE_DSN": "clickhouse://default:pa55word@127.0.0.1:1/readsync", "READSYNC_API_BASE_URL": "ftp://x"},
			Needs{DSN: true, Mode: "--verify"}, `READSYNC_API_BASE_URL="ftp://x": the scheme is "ftp", not http or https: want scheme and host only, such as https://api.example.com`},
	} {
		_, err := Load(context.Background(), c.env, c.needs)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v\nwant %s", c.name, err, c.want)
		}
	}
}

func validEnvWithout(t *testing.T, name string) Environ {
	env := validEnv(t)
	delete(env, name)
	return env
}
