package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// secret is a configuration value that must never be printed. Its String
// and LogValue hide it, so a config struct that reaches a log line or an
// error by accident shows nothing.
type secret string

func (s *secret) EnvDecode(v string) error { *s = secret(v); return nil }
func (s secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}
func (s secret) GoString() string             { return s.String() }
func (s secret) LogValue() slog.Value         { return slog.StringValue(s.String()) }
func (s secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// env is the process environment readsync reads. Every variable is
// documented in the README; the names are a contract.
type env struct {
	APIBaseURL     string        `env:"READSYNC_API_BASE_URL, required"`
	ClientID       string        `env:"READSYNC_CLIENT_ID, required"`
	ClientSecret   secret        `env:"READSYNC_CLIENT_SECRET, required"`
	ClickHouseDSN  secret        `env:"READSYNC_CLICKHOUSE_DSN"`
	CAFile         string        `env:"READSYNC_CLICKHOUSE_CA_FILE"`
	SchedulesFile  string        `env:"READSYNC_SCHEDULES_FILE, default=schedules.yaml"`
	Concurrency    int           `env:"READSYNC_CONCURRENCY, default=8"`
	RequestTimeout time.Duration `env:"READSYNC_REQUEST_TIMEOUT, default=30s"`
	LogLevel       string        `env:"READSYNC_LOG_LEVEL, default=info"`
	LogFormat      string        `env:"READSYNC_LOG_FORMAT"`
	SourceTimezone string        `env:"READSYNC_SOURCE_TIMEZONE, default=UTC"`
	BatchRows      int           `env:"READSYNC_BATCH_ROWS, default=50000"`

	// The cluster's replica path defaults to sink.DefaultReplicaPath.
	ClickHouseCluster     string `env:"READSYNC_CLICKHOUSE_CLUSTER"`
	ClickHouseReplicaPath string `env:"READSYNC_CLICKHOUSE_REPLICA_PATH"`

	MaxRetries       int           `env:"READSYNC_MAX_RETRIES, default=4"`
	RetryBackoff     time.Duration `env:"READSYNC_RETRY_BACKOFF, default=500ms"`
	RateLimit        float64       `env:"READSYNC_RATE_LIMIT, default=20"`
	MaxResponseBytes byteSize      `env:"READSYNC_MAX_RESPONSE_BYTES, default=256MiB"`

	SpoolDir           string        `env:"READSYNC_SPOOL_DIR, default=./spool"`
	SpoolMaxBytes      byteSize      `env:"READSYNC_SPOOL_MAX_BYTES, default=1GiB"`
	SpoolFlushInterval time.Duration `env:"READSYNC_SPOOL_FLUSH_INTERVAL, default=30s"`
	ShutdownGrace      time.Duration `env:"READSYNC_SHUTDOWN_GRACE, default=30s"`

	Shard    string `env:"READSYNC_SHARD"`
	HTTPAddr string `env:"READSYNC_HTTP_ADDR, default=:9090"`
}

// config is env validated and parsed, plus the schedules file.
type config struct {
	env
	Location *time.Location
	LogLevel slog.Level
	// ShardOf is READSYNC_SHARD parsed; the zero Shard owns every name.
	ShardOf sync.Shard
	DSN     sink.DSN // zero in dry-run mode
	// Topology is where the tables live: one server or a cluster.
	Topology  sink.Topology
	Schedules []sync.Schedule
}

// configError is bad configuration or usage: the process exits 2.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

func configErrorf(format string, args ...any) error {
	return &configError{fmt.Errorf(format, args...)}
}

// loadConfig reads the environment through lookup, validates every value
// and loads the schedules file. needDSN is false for a dry run, which
// writes nowhere.
func loadConfig(ctx context.Context, lookup envconfig.Lookuper, needDSN bool) (*config, error) {
	var e env
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &e, Lookuper: lookup}); err != nil {
		return nil, &configError{nameVariable(err)}
	}
	c := &config{env: e}
	if err := c.validate(needDSN); err != nil {
		return nil, err
	}
	schedules, err := sync.LoadSchedules(e.SchedulesFile)
	if err != nil {
		return nil, configErrorf("READSYNC_SCHEDULES_FILE: %w", err)
	}
	c.Schedules = schedules
	return c, nil
}

func (c *config) validate(needDSN bool) error {
	if _, err := apiclient.ParseBaseURL(c.APIBaseURL); err != nil {
		return configErrorf("READSYNC_API_BASE_URL: %w", err)
	}
	if strings.TrimSpace(c.ClientID) == "" {
		return configErrorf("READSYNC_CLIENT_ID is empty")
	}
	if c.ClientSecret == "" {
		return configErrorf("READSYNC_CLIENT_SECRET is empty")
	}
	if c.Concurrency < 1 || c.Concurrency > 1024 {
		return configErrorf("READSYNC_CONCURRENCY %d: must be between 1 and 1024", c.Concurrency)
	}
	if c.RequestTimeout <= 0 {
		return configErrorf("READSYNC_REQUEST_TIMEOUT %s: must be positive", c.RequestTimeout)
	}
	if c.BatchRows < 1 {
		return configErrorf("READSYNC_BATCH_ROWS %d: must be at least 1", c.BatchRows)
	}
	if c.MaxRetries < 0 || c.MaxRetries > 100 {
		return configErrorf("READSYNC_MAX_RETRIES %d: must be between 0 and 100", c.MaxRetries)
	}
	if c.RetryBackoff <= 0 {
		return configErrorf("READSYNC_RETRY_BACKOFF %s: must be positive", c.RetryBackoff)
	}
	if c.RateLimit < 0 || math.IsNaN(c.RateLimit) || math.IsInf(c.RateLimit, 0) {
		return configErrorf("READSYNC_RATE_LIMIT %v: must be a number of requests per second, 0 for no limit", c.RateLimit)
	}
	if c.MaxResponseBytes < 1 {
		return configErrorf("READSYNC_MAX_RESPONSE_BYTES %d: must be positive", c.MaxResponseBytes)
	}
	if strings.TrimSpace(c.SpoolDir) == "" {
		return configErrorf("READSYNC_SPOOL_DIR is empty")
	}
	if c.SpoolMaxBytes < 1 {
		return configErrorf("READSYNC_SPOOL_MAX_BYTES %d: must be positive", c.SpoolMaxBytes)
	}
	if c.SpoolFlushInterval <= 0 {
		return configErrorf("READSYNC_SPOOL_FLUSH_INTERVAL %s: must be positive", c.SpoolFlushInterval)
	}
	if c.ShutdownGrace < 0 {
		return configErrorf("READSYNC_SHUTDOWN_GRACE %s: must not be negative", c.ShutdownGrace)
	}
	shard, err := sync.ParseShard(c.Shard)
	if err != nil {
		return configErrorf("READSYNC_SHARD: %w", err)
	}
	c.ShardOf = shard
	if err := c.LogLevel.UnmarshalText([]byte(c.env.LogLevel)); err != nil {
		return configErrorf("READSYNC_LOG_LEVEL %q: must be debug, info, warn or error", c.env.LogLevel)
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		return configErrorf("READSYNC_LOG_FORMAT %q: must be text or json", c.LogFormat)
	}
	loc, err := time.LoadLocation(c.SourceTimezone)
	if err != nil {
		return configErrorf("READSYNC_SOURCE_TIMEZONE %q: %w", c.SourceTimezone, err)
	}
	c.Location = loc
	if c.ClickHouseDSN == "" {
		if needDSN {
			return configErrorf("READSYNC_CLICKHOUSE_DSN is required (only --dry-run runs without ClickHouse)")
		}
		return nil
	}
	dsn, err := sink.ParseDSN(string(c.ClickHouseDSN))
	if err != nil {
		return configErrorf("READSYNC_CLICKHOUSE_DSN: %w", err)
	}
	if c.CAFile != "" {
		if dsn, err = dsn.WithCAFile(c.CAFile); err != nil {
			return configErrorf("READSYNC_CLICKHOUSE_CA_FILE: %w", err)
		}
	}
	c.DSN = dsn
	topo, err := parseTopology(c.ClickHouseCluster, c.ClickHouseReplicaPath)
	if err != nil {
		return &configError{err}
	}
	c.Topology = topo
	return nil
}

// parseTopology checks the cluster variables. Whether the server knows the
// cluster is for Migrate and --check to find out.
func parseTopology(cluster, replicaPath string) (sink.Topology, error) {
	if cluster == "" {
		if replicaPath != "" {
			return sink.Topology{}, errors.New("READSYNC_CLICKHOUSE_REPLICA_PATH is set but READSYNC_CLICKHOUSE_CLUSTER is not: a replica path only applies to a cluster")
		}
		return sink.Topology{}, nil
	}
	for _, r := range cluster {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.", r)) {
			return sink.Topology{}, fmt.Errorf("READSYNC_CLICKHOUSE_CLUSTER %q: a cluster name of remote_servers, such as main_cluster (letters, digits, _ - .)", cluster)
		}
	}
	if replicaPath != "" && (!strings.HasPrefix(replicaPath, "/") || !strings.Contains(replicaPath, "{table}")) {
		return sink.Topology{}, fmt.Errorf("READSYNC_CLICKHOUSE_REPLICA_PATH %q: a ZooKeeper path starting with / and containing {table}, such as %s",
			replicaPath, sink.DefaultReplicaPath)
	}
	return sink.Topology{Cluster: cluster, ReplicaPath: replicaPath}, nil
}

// nameVariable rewrites envconfig's errors, which name the Go field, to
// name the environment variable a user sets.
func nameVariable(err error) error {
	t := reflect.TypeOf(env{})
	for i := range t.NumField() {
		f := t.Field(i)
		prefix := f.Name + ": "
		if msg := err.Error(); strings.HasPrefix(msg, prefix) {
			name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
			return &renamedError{msg: name + ": " + strings.TrimPrefix(msg, prefix), err: err}
		}
	}
	if errors.Is(err, envconfig.ErrMissingRequired) {
		return fmt.Errorf("environment: %w", err)
	}
	return err
}

type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }
