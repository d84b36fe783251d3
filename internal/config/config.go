// Package config is readsync's configuration: the environment variables it
// reads, validated and parsed, with the schedules file they name. Every
// variable is declared once, as a field of Env; loading, --help, the
// warning about a misspelt name and the tests that hold the docs and the
// deployments to the binary all derive from it.
package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/internal/shard"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sync"
)

// Secret is a configuration value that must never be printed. Its String
// and LogValue hide it, so a config struct that reaches a log line or an
// error by accident shows nothing.
type Secret string

func (s *Secret) EnvDecode(v string) error { *s = Secret(v); return nil }
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}
func (s Secret) GoString() string             { return s.String() }
func (s Secret) LogValue() slog.Value         { return slog.StringValue(s.String()) }
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Env is the process environment readsync reads, one field per variable.
// The env tag gives the name and the default or "required" (go-envconfig's
// syntax), the help tag a one-line description; the tag for:"api" marks a
// variable only the modes that call the upstream API need (see Needs). Loading, --help, the
// unknown-variable warning and the tests all derive from these tags, so a
// new variable is a new field with both. The names are a contract.
type Env struct {
	APIBaseURL     string        `env:"READSYNC_API_BASE_URL, required" for:"api" help:"scheme and host of the API, such as https://api.example.com"`
	ClientID       string        `env:"READSYNC_CLIENT_ID, required" for:"api" help:"sent as the client_id header"`
	ClientSecret   Secret        `env:"READSYNC_CLIENT_SECRET, required" for:"api" help:"sent as the client_secret header; never logged"`
	ClickHouseDSN  Secret        `env:"READSYNC_CLICKHOUSE_DSN" help:"clickhouse://user:password@host:9000/database (native protocol); required unless --backfill --dry-run or --check --dry-run"`
	CAFile         string        `env:"READSYNC_CLICKHOUSE_CA_FILE" help:"PEM file of the CA that signed ClickHouse's certificate; needs secure=true in the DSN"`
	SchedulesFile  string        `env:"READSYNC_SCHEDULES_FILE, default=schedules.yaml" for:"api" help:"path of the schedules file"`
	Concurrency    int           `env:"READSYNC_CONCURRENCY, default=8" help:"names in flight at once, 1 to 1024"`
	RequestTimeout time.Duration `env:"READSYNC_REQUEST_TIMEOUT, default=30s" help:"bound on one HTTP request, body included"`
	LogLevel       string        `env:"READSYNC_LOG_LEVEL, default=info" help:"debug, info, warn or error"`
	LogFormat      string        `env:"READSYNC_LOG_FORMAT" help:"text or json; unset: text on a terminal, else json"`
	SourceTimezone string        `env:"READSYNC_SOURCE_TIMEZONE, default=UTC" help:"IANA zone the API's times are written in"`
	BatchRows      int           `env:"READSYNC_BATCH_ROWS, default=50000" help:"rows gathered before an INSERT (a batch is also written once its rows hold 8 MiB)"`
	BatchTimeout   time.Duration `env:"READSYNC_BATCH_TIMEOUT, default=30s" help:"longest wait of fetched rows before an INSERT, however slowly a batch fills; a pass cut off loses no more"`

	Migrations string `env:"READSYNC_MIGRATIONS, default=apply" help:"apply: the daemon, --backfill and --flush-spool apply pending migrations themselves; wait: they leave them to readsync --migrate (the chart's hook Job) and spool rows until the schema is current"`

	ClickHouseCluster     string `env:"READSYNC_CLICKHOUSE_CLUSTER" help:"cluster of the server's remote_servers to create replicated, sharded tables on; unset: one server"`
	ClickHouseReplicaPath string `env:"READSYNC_CLICKHOUSE_REPLICA_PATH" help:"ZooKeeper path of the replicated tables in cluster mode; unset: /clickhouse/tables/{shard}/{database}/{table}"`

	MaxRetries       int           `env:"READSYNC_MAX_RETRIES, default=4" help:"retries of a transiently failed upstream request, 0 to 100"`
	RetryBackoff     time.Duration `env:"READSYNC_RETRY_BACKOFF, default=500ms" help:"wait before the first retry, upstream and database; doubles up to 30s"`
	RateLimit        float64       `env:"READSYNC_RATE_LIMIT, default=20" help:"upstream requests per second, retries included; 0 for no limit"`
	MaxResponseBytes ByteSize      `env:"READSYNC_MAX_RESPONSE_BYTES, default=256MiB" help:"largest response body accepted"`

	SpoolDir           string        `env:"READSYNC_SPOOL_DIR, default=./spool" help:"directory for rows ClickHouse did not take"`
	SpoolMaxBytes      ByteSize      `env:"READSYNC_SPOOL_MAX_BYTES, default=1GiB" help:"size limit of the spool"`
	SpoolFlushInterval time.Duration `env:"READSYNC_SPOOL_FLUSH_INTERVAL, default=30s" help:"how often the daemon retries delivering the spool"`
	ShutdownGrace      time.Duration `env:"READSYNC_SHUTDOWN_GRACE, default=30s" help:"how long a running pass may go on after SIGTERM or SIGINT"`

	RetainRaw    Retention `env:"READSYNC_RETAIN_RAW" help:"how long the raw history (every snapshot, the per-snapshot rollups, the change logs, sync_runs, reconciles, the names' outcomes) is kept, such as 90d; unset or 0: forever"`
	RetainHourly Retention `env:"READSYNC_RETAIN_HOURLY" help:"how long the hourly rollups and hourly gains are kept, at least READSYNC_RETAIN_RAW, such as 365d; unset or 0: forever"`
	RetainDaily  Retention `env:"READSYNC_RETAIN_DAILY" help:"how long the daily rollups and daily gains are kept, at least READSYNC_RETAIN_HOURLY, such as 730d; unset or 0: forever"`

	NamesNotReadPasses int `env:"READSYNC_NAMES_NOT_READ_PASSES, default=3" help:"passes in a row a name must have failed for readsync_names_not_read to count it (the alert ReadsyncNamesNotRead), 1 to 100000"`

	Shard    string `env:"READSYNC_SHARD" help:"i/n: handle only the scheduled names whose hash mod n is i (i may be a pod name ending in -i); <pod>/statefulset: n is the pod's StatefulSet's replicas, read before each pass; unset: all"`
	HTTPAddr string `env:"READSYNC_HTTP_ADDR, default=:9090" help:"the daemon's listener for the status page (/ and /status.json), /healthz, /readyz and /metrics"`
	// StatusInterval paces the status page's reads of ClickHouse, which
	// do not follow its viewers.
	StatusInterval time.Duration `env:"READSYNC_STATUS_INTERVAL, default=1m" help:"how often the status page reads ClickHouse, whatever the number of viewers"`

	// Read only with READSYNC_SHARD=<pod>/statefulset: how an in-cluster
	// client finds and authenticates to the API server.
	ServiceAccountDir string `env:"READSYNC_SERVICEACCOUNT_DIR, default=/var/run/secrets/kubernetes.io/serviceaccount" help:"the pod's service account token, ca.crt and namespace, for READSYNC_SHARD=<pod>/statefulset"`
	KubernetesHost    string `env:"KUBERNETES_SERVICE_HOST" help:"the Kubernetes API server's address, which Kubernetes sets in every pod; for READSYNC_SHARD=<pod>/statefulset"`
	KubernetesPort    string `env:"KUBERNETES_SERVICE_PORT" help:"the Kubernetes API server's port, which Kubernetes sets in every pod; for READSYNC_SHARD=<pod>/statefulset"`
}

// Config is Env validated and parsed, plus the schedules file.
type Config struct {
	Env
	Location *time.Location
	LogLevel slog.Level
	// ShardOf is a fixed READSYNC_SHARD parsed: shard.All when unset.
	ShardOf shard.Share
	// Member is set, and ShardOf all, when READSYNC_SHARD is
	// <pod>/statefulset: the count is then read from the API server.
	Member *shard.Member
	DSN    chconn.DSN // zero in dry-run mode
	// Topology is where the tables live: one server or a cluster.
	Topology chconn.Topology
	// Schedules is nil for a mode that reads only ClickHouse when
	// READSYNC_SCHEDULES_FILE is not set (see Needs).
	Schedules []sync.Schedule
	// Unknown lists the READSYNC_ variables set in the environment that
	// readsync does not read.
	Unknown []UnknownVariable
}

// UnknownVariable is a READSYNC_ variable readsync does not read, most
// likely a typo of Guess when Guess is set.
type UnknownVariable struct{ Name, Guess string }

func (u UnknownVariable) String() string {
	if u.Guess == "" {
		return u.Name + " is not a readsync variable"
	}
	return u.Name + " is not a readsync variable (did you mean " + u.Guess + "?)"
}

// Environ is an environment that can list the names set in it, so that a
// misspelt variable is noticed. main passes the process's; Load accepts any
// envconfig.Lookuper and checks names only when it is an Environ.
type Environ map[string]string

// OSEnviron is the process environment.
func OSEnviron() Environ {
	e := Environ{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		e[k] = v
	}
	return e
}

// Lookup implements envconfig.Lookuper.
func (e Environ) Lookup(key string) (string, bool) {
	v, ok := e[key]
	return v, ok
}

// Variable is one environment variable readsync reads, as Env's tags
// declare it.
type Variable struct {
	Name string
	// Default is the value when the variable is unset; empty for none.
	Default  string
	Required bool
	// Help is the one-line description --help prints.
	Help string
	// API is set for a variable only the modes that call the upstream
	// API need.
	API bool
}

// Variables lists the environment variables readsync reads, in the order
// --help prints them. It is for the tests that hold the documentation and
// the deployments to the binary.
func Variables() []Variable {
	var vs []Variable
	for _, v := range variables() {
		vs = append(vs, v.Variable)
	}
	return vs
}

// variable describes one environment variable, read from Env's tags.
type variable struct {
	Variable
	field reflect.StructField
}

// variables lists Env's variables in declaration order.
func variables() []variable {
	t := reflect.TypeFor[Env]()
	vs := make([]variable, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("env"), ",")
		v := variable{Variable: Variable{Name: strings.TrimSpace(name), Help: f.Tag.Get("help"), API: f.Tag.Get("for") == "api"}, field: f}
		for _, o := range strings.Split(opts, ",") {
			o = strings.TrimSpace(o)
			if d, ok := strings.CutPrefix(o, "default="); ok {
				v.Default = d
			}
			v.Required = v.Required || o == "required"
		}
		vs = append(vs, v)
	}
	return vs
}

// form says what a value of the variable's type looks like, with an
// example: the default when there is one.
func (v variable) form() string {
	example := func(fallback string) string {
		if v.Default != "" {
			return v.Default
		}
		return fallback
	}
	switch t := v.field.Type; {
	case t == reflect.TypeFor[time.Duration]():
		return "a Go duration such as " + example("30s")
	case t == reflect.TypeFor[Retention]():
		return retentionForm
	case t == reflect.TypeFor[ByteSize]():
		return "a size in bytes, optionally with KiB, MiB, GiB or TiB, such as " + example("256MiB")
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "a whole number such as " + example("8")
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number such as " + example("2.5")
	default:
		return v.Help
	}
}

// problems gathers everything wrong with the configuration, so that one
// run reports it all.
type problems struct {
	errs []error
	// raw holds each variable's value as set, or its default.
	raw map[string]string
}

// bad reports that the variable's value is not of the form described.
func (p *problems) bad(name, form string) {
	p.errs = append(p.errs, fmt.Errorf("%s=%q: %s", name, p.raw[name], form))
}

// add reports err, which already names the variable.
func (p *problems) add(err error) { p.errs = append(p.errs, err) }

// Needs says what a mode of readsync uses, so that it is not refused for
// settings it never reads.
type Needs struct {
	// API is set for the modes that call the upstream API (the daemon,
	// --backfill, --check, --flush-spool): its URL and credentials are
	// required and the schedules file is read. Without it they are
	// checked only when set, and the schedules file is read only when
	// READSYNC_SCHEDULES_FILE names it (--failing-names --schedule and the
	// retention's check against the schedules use it then).
	API bool
	// DSN is set for the modes that cannot run without ClickHouse.
	DSN bool
	// Mode is the mode's flags, such as --expire --dry-run, for the
	// message of a missing DSN; empty for the daemon.
	Mode string
}

// Load reads the environment through lookup, validates every value
// and loads the schedules file, reporting every problem at once; needs
// says which settings the mode requires.
func Load(ctx context.Context, lookup envconfig.Lookuper, needs Needs) (*Config, error) {
	c := &Config{}
	p := &problems{raw: map[string]string{}}
	target := reflect.ValueOf(&c.Env).Elem()
	decoded := map[string]bool{}
	for _, v := range variables() {
		raw, set := lookup.Lookup(v.Name)
		if !set {
			raw = v.Default
		}
		if v.field.Type == reflect.TypeFor[Secret]() {
			raw = Secret(raw).String()
		}
		p.raw[v.Name] = raw
		val, err := decodeVariable(ctx, lookup, v)
		switch {
		case errors.Is(err, envconfig.ErrMissingRequired) && v.API && !needs.API:
			// Not this mode's: left unset.
		case errors.Is(err, envconfig.ErrMissingRequired):
			p.add(fmt.Errorf("%s is required: %s", v.Name, v.Help))
		case err != nil:
			p.bad(v.Name, v.form())
		default:
			target.FieldByIndex(v.field.Index).Set(val)
			decoded[v.Name] = true
		}
	}
	c.validate(p, decoded, needs)
	_, schedulesSet := lookup.Lookup("READSYNC_SCHEDULES_FILE")
	if decoded["READSYNC_SCHEDULES_FILE"] && (needs.API || schedulesSet) {
		schedules, err := sync.LoadSchedules(c.SchedulesFile)
		if err != nil {
			p.add(fmt.Errorf("READSYNC_SCHEDULES_FILE: %w", err))
		}
		c.Schedules = schedules
	}
	c.checkRetention(p, decoded)
	if e, ok := lookup.(Environ); ok {
		c.Unknown = unknownVariables(e)
	}
	if len(p.errs) > 0 {
		// A misspelt name is the likeliest cause of a missing variable.
		for _, u := range c.Unknown {
			p.add(errors.New(u.String()))
		}
		return nil, errors.Join(p.errs...)
	}
	return c, nil
}

// decodeVariable decodes one variable with go-envconfig, which stops at
// the first error of a struct: a struct of one field lets every variable
// be tried.
func decodeVariable(ctx context.Context, lookup envconfig.Lookuper, v variable) (reflect.Value, error) {
	one := reflect.New(reflect.StructOf([]reflect.StructField{{Name: v.field.Name, Type: v.field.Type, Tag: v.field.Tag}}))
	err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: one.Interface(), Lookuper: lookup})
	return one.Elem().Field(0), err
}

// validate checks the decoded values, skipping variables that did not
// decode (their zero value would only repeat the problem), and parses
// those that become more than their text.
func (c *Config) validate(p *problems, decoded map[string]bool, needs Needs) {
	if decoded["READSYNC_API_BASE_URL"] {
		if _, err := apiclient.ParseBaseURL(c.APIBaseURL); err != nil {
			p.add(fmt.Errorf("READSYNC_API_BASE_URL=%q: %w", redactedURL(c.APIBaseURL), err))
		}
	}
	c.checkRanges(p, decoded)
	c.parseShard(p, decoded)
	c.parseLogAndZone(p, decoded)
	if topo, err := parseTopology(c.ClickHouseCluster, c.ClickHouseReplicaPath); err != nil {
		p.add(err)
	} else {
		c.Topology = topo
	}
	if decoded["READSYNC_CLICKHOUSE_DSN"] {
		c.parseDSN(p, needs)
	}
}

// check reports the variable name as bad when it decoded but ok says its
// value is out of range.
func (p *problems) check(decoded map[string]bool, name string, ok func() bool, form string) {
	if decoded[name] && !ok() {
		p.bad(name, form)
	}
}

// checkRanges checks the values that are used as they are: each within
// its range.
func (c *Config) checkRanges(p *problems, decoded map[string]bool) {
	check := func(name string, ok func() bool, form string) { p.check(decoded, name, ok, form) }
	check("READSYNC_CLIENT_ID", func() bool { return strings.TrimSpace(c.ClientID) != "" }, "the API client id, not empty")
	check("READSYNC_CLIENT_SECRET", func() bool { return c.ClientSecret != "" }, "the API client secret, not empty")
	check("READSYNC_CONCURRENCY", func() bool { return c.Concurrency >= 1 && c.Concurrency <= 1024 },
		"a whole number from 1 to 1024, such as 8")
	check("READSYNC_REQUEST_TIMEOUT", func() bool { return c.RequestTimeout > 0 }, "a positive Go duration such as 30s")
	check("READSYNC_BATCH_ROWS", func() bool { return c.BatchRows >= 1 }, "a whole number of at least 1, such as 50000")
	check("READSYNC_BATCH_TIMEOUT", func() bool { return c.BatchTimeout > 0 }, "a positive Go duration such as 30s")
	check("READSYNC_MAX_RETRIES", func() bool { return c.MaxRetries >= 0 && c.MaxRetries <= 100 },
		"a whole number from 0 to 100, such as 4")
	check("READSYNC_RETRY_BACKOFF", func() bool { return c.RetryBackoff > 0 }, "a positive Go duration such as 500ms")
	check("READSYNC_RATE_LIMIT", func() bool {
		return c.RateLimit >= 0 && !math.IsNaN(c.RateLimit) && !math.IsInf(c.RateLimit, 0)
	}, "a number of requests per second such as 20, or 0 for no limit")
	check("READSYNC_MAX_RESPONSE_BYTES", func() bool { return c.MaxResponseBytes >= 1 }, "a positive size such as 256MiB")
	check("READSYNC_SPOOL_DIR", func() bool { return strings.TrimSpace(c.SpoolDir) != "" }, "a directory such as ./spool")
	check("READSYNC_SPOOL_MAX_BYTES", func() bool { return c.SpoolMaxBytes >= 1 }, "a positive size such as 1GiB")
	check("READSYNC_SPOOL_FLUSH_INTERVAL", func() bool { return c.SpoolFlushInterval > 0 }, "a positive Go duration such as 30s")
	check("READSYNC_SHUTDOWN_GRACE", func() bool { return c.ShutdownGrace >= 0 }, "a Go duration of 0 or more, such as 30s")
	check("READSYNC_STATUS_INTERVAL", func() bool { return c.StatusInterval >= time.Second }, "a Go duration of at least 1s such as 1m")
	check("READSYNC_NAMES_NOT_READ_PASSES", func() bool { return c.NamesNotReadPasses >= 1 && c.NamesNotReadPasses <= 100000 },
		"a whole number from 1 to 100000, such as 3")
}

// parseShard parses READSYNC_SHARD into Member or ShardOf, and checks that
// a StatefulSet member can reach the Kubernetes API with its service account.
func (c *Config) parseShard(p *problems, decoded map[string]bool) {
	c.ShardOf = shard.All()
	p.check(decoded, "READSYNC_SHARD", func() bool {
		if m, ok, err := shard.ParseMember(c.Shard); ok {
			c.Member = &m
			return err == nil
		}
		s, err := shard.Parse(c.Shard)
		c.ShardOf = s
		return err == nil
	}, shardForm)
	if c.Member != nil && decoded["KUBERNETES_SERVICE_HOST"] && (c.KubernetesHost == "" || c.KubernetesPort == "") {
		p.add(fmt.Errorf("READSYNC_SHARD=%q: reads the StatefulSet's replicas from the Kubernetes API, but KUBERNETES_SERVICE_HOST=%q and KUBERNETES_SERVICE_PORT=%q, which Kubernetes sets in every pod: run it in the StatefulSet's pod, or set READSYNC_SHARD to i/n",
			c.Shard, c.KubernetesHost, c.KubernetesPort))
	}
	p.check(decoded, "READSYNC_SERVICEACCOUNT_DIR", func() bool { return strings.TrimSpace(c.ServiceAccountDir) != "" },
		"the directory of the service account's token, ca.crt and namespace, such as /var/run/secrets/kubernetes.io/serviceaccount")
}

// parseLogAndZone parses the log level and format and the source's time zone.
func (c *Config) parseLogAndZone(p *problems, decoded map[string]bool) {
	p.check(decoded, "READSYNC_LOG_LEVEL", func() bool { return c.LogLevel.UnmarshalText([]byte(c.Env.LogLevel)) == nil },
		"one of debug, info, warn or error")
	p.check(decoded, "READSYNC_MIGRATIONS", func() bool { return c.Migrations == MigrationsApply || c.Migrations == MigrationsWait },
		"apply or wait")
	p.check(decoded, "READSYNC_LOG_FORMAT", func() bool { return c.LogFormat == "" || c.LogFormat == "text" || c.LogFormat == "json" },
		"text or json, or unset")
	p.check(decoded, "READSYNC_SOURCE_TIMEZONE", func() bool {
		loc, err := time.LoadLocation(c.SourceTimezone)
		c.Location = loc
		return err == nil
	}, "an IANA time zone such as UTC or Asia/Shanghai")
}

// parseDSN parses READSYNC_CLICKHOUSE_DSN with the CA file it may need.
// The DSN holds a password: its errors describe it without quoting it.
func (c *Config) parseDSN(p *problems, needs Needs) {
	if c.ClickHouseDSN == "" {
		switch {
		case !needs.DSN:
		case needs.API:
			p.add(errors.New("READSYNC_CLICKHOUSE_DSN is required (only --backfill --dry-run and --check --dry-run run without ClickHouse): " +
				"such as clickhouse://user:password@host:9000/database"))
		default:
			p.add(fmt.Errorf("READSYNC_CLICKHOUSE_DSN is required: %s reads ClickHouse: "+
				"such as clickhouse://user:password@host:9000/database", needs.Mode))
		}
		return
	}
	dsn, err := chconn.ParseDSN(string(c.ClickHouseDSN))
	if err == nil {
		err = dsn.CheckAddrs()
	}
	if err != nil {
		p.add(fmt.Errorf("READSYNC_CLICKHOUSE_DSN: %w", err))
		return
	}
	if c.CAFile != "" {
		if dsn, err = dsn.WithCAFile(c.CAFile); err != nil {
			p.add(fmt.Errorf("READSYNC_CLICKHOUSE_CA_FILE: %w", err))
		}
	}
	c.DSN = dsn
}

// The values of READSYNC_MIGRATIONS.
const (
	// MigrationsApply: a process that writes applies pending migrations.
	MigrationsApply = "apply"
	// MigrationsWait: it waits for another process to apply them.
	MigrationsWait = "wait"
)

// shardForm is what READSYNC_SHARD looks like.
const shardForm = "i/n with 0 <= i < n, such as 0/3, where i may be a pod name ending in -i, such as readsync-0/3; " +
	"or a StatefulSet's pod name followed by /statefulset, such as readsync-0/statefulset, for n read from the StatefulSet's replicas"

// parseTopology checks the cluster variables. Whether the server knows the
// cluster is for Migrate and --check to find out.
func parseTopology(cluster, replicaPath string) (chconn.Topology, error) {
	if cluster == "" {
		if replicaPath != "" {
			return chconn.Topology{}, fmt.Errorf("READSYNC_CLICKHOUSE_REPLICA_PATH=%q: applies to a cluster only; set READSYNC_CLICKHOUSE_CLUSTER too, or unset it", replicaPath)
		}
		return chconn.Topology{}, nil
	}
	for _, r := range cluster {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.", r)) {
			return chconn.Topology{}, fmt.Errorf("READSYNC_CLICKHOUSE_CLUSTER=%q: a cluster name of the server's remote_servers, such as main_cluster (letters, digits, _ - .)", cluster)
		}
	}
	if replicaPath != "" && (!strings.HasPrefix(replicaPath, "/") || !strings.Contains(replicaPath, "{table}")) {
		return chconn.Topology{}, fmt.Errorf("READSYNC_CLICKHOUSE_REPLICA_PATH=%q: a ZooKeeper path starting with / and containing {table}, such as %s",
			replicaPath, chconn.DefaultReplicaPath)
	}
	return chconn.Topology{Cluster: cluster, ReplicaPath: replicaPath}, nil
}

// unknownVariables lists the READSYNC_ variables set in e that neither
// readsync nor the project's scripts and tests read, each with the known
// name it most resembles when one is close: most are typos.
func unknownVariables(e Environ) []UnknownVariable {
	known := map[string]bool{}
	var names []string
	for _, v := range variables() {
		known[v.Name] = true
		names = append(names, v.Name)
	}
	var unknown []UnknownVariable
	for k := range e {
		if strings.HasPrefix(k, "READSYNC_") && !known[k] && !isToolVariable(k) && !isServiceLink(k, e[k]) {
			unknown = append(unknown, UnknownVariable{Name: k, Guess: closest(k, names)})
		}
	}
	slices.SortFunc(unknown, func(a, b UnknownVariable) int { return strings.Compare(a.Name, b.Name) })
	return unknown
}

// isToolVariable reports whether name is read by the project's scripts or
// tests rather than by readsync: they are set where `make test` and
// `make demo` run readsync, and are no typo.
func isToolVariable(name string) bool {
	if strings.HasPrefix(name, "READSYNC_TEST_") || strings.HasPrefix(name, "READSYNC_REQUIRE_") {
		return true
	}
	switch name {
	case "READSYNC_NO_INSTALL", "READSYNC_KEEP_TEST_DB",
		"READSYNC_CLICKHOUSE_SERVER_BIN", "READSYNC_CLICKHOUSE_DIR",
		"READSYNC_CLICKHOUSE_TCP_PORT", "READSYNC_CLICKHOUSE_HTTP_PORT", "READSYNC_CLICKHOUSE_RELEASE":
		return true
	}
	return false
}

// Kubernetes gives a pod, unless its spec sets enableServiceLinks: false,
// variables for every Service of its namespace, in the form Docker links
// had; a Service named readsync, or readsync-<anything>, makes them start
// with readsync's prefix. For a Service readsync at 10.0.0.11 with the
// port 9090 named http:
//
//	READSYNC_SERVICE_HOST=10.0.0.11
//	READSYNC_SERVICE_PORT=9090
//	READSYNC_SERVICE_PORT_HTTP=9090
//	READSYNC_PORT=tcp://10.0.0.11:9090
//	READSYNC_PORT_9090_TCP=tcp://10.0.0.11:9090
//	READSYNC_PORT_9090_TCP_PROTO=tcp
//	READSYNC_PORT_9090_TCP_PORT=9090
//	READSYNC_PORT_9090_TCP_ADDR=10.0.0.11
//
// Each is recognised by its name and its value together, so that a typo
// such as READSYNC_CLICKHOUSE_PORT=9000 is still reported.
var (
	serviceLinkName  = regexp.MustCompile(`^READSYNC(_[A-Z0-9_]+?)??_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_(\d+)_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$`)
	serviceLinkProto = regexp.MustCompile(`^(tcp|udp|sctp)://(\S+)$`)
)

// isServiceLink reports whether name=value is a variable Kubernetes sets
// for a Service whose name starts with readsync: no setting of readsync's.
func isServiceLink(name, value string) bool {
	m := serviceLinkName.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	isIP := func(v string) bool { _, err := netip.ParseAddr(v); return err == nil }
	isPort := func(v string) bool {
		n, err := strconv.Atoi(v)
		return err == nil && n > 0 && n < 65536 && strconv.Itoa(n) == v
	}
	// proto://host:port, with the protocol and port given when they are.
	isURL := func(v, proto, port string) bool {
		u := serviceLinkProto.FindStringSubmatch(v)
		if u == nil || (proto != "" && u[1] != strings.ToLower(proto)) {
			return false
		}
		ap, err := netip.ParseAddrPort(u[2])
		return err == nil && (port == "" || strconv.Itoa(int(ap.Port())) == port)
	}
	kind, port, proto, field := m[2], m[4], m[5], m[6]
	switch {
	case kind == "SERVICE_HOST":
		return isIP(value)
	case strings.HasPrefix(kind, "SERVICE_PORT"):
		return isPort(value)
	case kind == "PORT":
		return isURL(value, "", "")
	case field == "":
		return isURL(value, proto, port)
	case field == "_PROTO":
		return value == strings.ToLower(proto)
	case field == "_PORT":
		return value == port
	default: // _ADDR
		return isIP(value)
	}
}

// closest returns the name within a few edits of s, or "".
func closest(s string, names []string) string {
	best, bestD := "", 4
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// redactedURL is s with a password in it masked, for a message that
// quotes it.
func redactedURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}

// SendsSecretInClear reports whether the API base URL is plain http to a
// host other than this machine: the client secret, a header, would cross
// the network unencrypted. Loopback is 127.0.0.0/8, ::1 and localhost.
func SendsSecretInClear(baseURL string) bool {
	u, err := apiclient.ParseBaseURL(baseURL)
	if err != nil || u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err != nil || !ip.Unmap().IsLoopback()
}
