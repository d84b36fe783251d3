// Package app is readsync: Run parses the command line and the
// environment, wires the upstream client, ClickHouse, the spool and the
// passes, and runs the mode the flags ask for. cmd/readsync supplies the
// process's context, arguments, environment and streams.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // READSYNC_SOURCE_TIMEZONE must resolve in images without a zone database

	"github.com/sethvargo/go-envconfig"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/internal/config"
	"github.com/readsync/readsync/internal/metrics"
	"github.com/readsync/readsync/internal/shard"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/spool"
	"github.com/readsync/readsync/sync"
)

// Exit codes; they are a contract with schedulers and scripts.
const (
	ExitOK      = 0 // every name synced
	ExitFailed  = 1 // at least one name failed, or the run could not complete
	ExitConfig  = 2 // bad configuration or usage
	ExitSpooled = 3 // rows were fetched but some wait in the spool; takes precedence over 1
)

// Run is the whole program, and returns its exit code; main only supplies
// the process's context, arguments, environment and streams. When lookup
// is an Environ, READSYNC_ variables readsync does not read are reported.
func Run(ctx context.Context, build Build, args []string, lookup envconfig.Lookuper, stdout, stderr io.Writer) int {
	f, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout)
		return ExitOK
	}
	if err != nil {
		// One line: the problem, and where the rest is.
		fmt.Fprintf(stderr, "readsync: %v; run readsync --help\n", err)
		return ExitConfig
	}
	if f.version {
		fmt.Fprintln(stdout, build)
		return ExitOK
	}
	needs := f.needs()
	cfg, err := config.Load(ctx, lookup, needs)
	if err != nil {
		// One line per problem, each complete on its own.
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "readsync: configuration: %s\n", line)
		}
		return ExitConfig
	}
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if !f.check {
		// --check reports these as a failed configuration instead.
		for _, u := range cfg.Unknown {
			log.Warn("environment variable ignored: not a readsync variable", "variable", u.Name, "did_you_mean", u.Guess)
		}
	}
	if config.SendsSecretInClear(cfg.APIBaseURL) {
		log.Warn("READSYNC_API_BASE_URL is plain http to a host that is not loopback: the client secret crosses the network unencrypted; use https",
			"url", cfg.APIBaseURL)
	}
	a, err := newApp(build, cfg, needs, log, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "readsync: configuration: %v\n", err)
		return ExitConfig
	}
	switch {
	case f.migrate:
		return a.migrate(ctx)
	case f.check:
		return a.check(ctx, f.dryRun, f.allNames)
	case f.backfill:
		return a.backfill(ctx, f)
	case f.flushSpool:
		return a.replaySpool(ctx, f.retryQuarantined)
	case f.verify:
		return a.verify(ctx, f.since.t, f.repair)
	case f.failingNames:
		return a.failingNames(ctx, f.schedule, f.json)
	case f.expire:
		return a.expire(ctx, f.dryRun)
	default:
		return a.daemon(ctx)
	}
}

// app holds what every mode shares: configuration, the logger and the one
// API client of the process (nil in a mode that reads only ClickHouse).
type app struct {
	build   Build
	cfg     *config.Config
	log     *slog.Logger
	api     *apiclient.Client
	metrics *metrics.Metrics
	// shares says which names each pass takes (READSYNC_SHARD).
	shares shard.Source
	stdout io.Writer
	stderr io.Writer
}

// newApp wires what the mode needs: the API client and the shares only
// for a mode that calls the API (needs.API).
func newApp(build Build, cfg *config.Config, needs config.Needs, log *slog.Logger, stdout, stderr io.Writer) (*app, error) {
	a := &app{build: build, cfg: cfg, log: log, metrics: metrics.New(build.Version, build.Commit), stdout: stdout, stderr: stderr}
	if !needs.API {
		return a, nil
	}
	var err error
	if a.shares, err = newShareSource(build, cfg, log, a.metrics); err != nil {
		return nil, err
	}
	if a.api, err = newAPIClient(build, cfg, log, a.metrics.ObserveRequest); err != nil {
		return nil, err
	}
	return a, nil
}

// configFailed reports configuration the mode found unusable once it
// tried it (a spool directory, a DSN, a listen address) and returns the
// exit code that says so.
func (a *app) configFailed(err error) int {
	fmt.Fprintf(a.stderr, "readsync: configuration: %v\n", err)
	return ExitConfig
}

// newAPIClient is the upstream client the configuration describes; log
// receives its retry warnings and observe every attempt.
func newAPIClient(build Build, cfg *config.Config, log *slog.Logger, observe func(op, outcome string, d time.Duration)) (*apiclient.Client, error) {
	return apiclient.New(apiclient.Config{
		BaseURL:          cfg.APIBaseURL,
		ClientID:         cfg.ClientID,
		ClientSecret:     string(cfg.ClientSecret),
		HTTPClient:       apiclient.NewHTTPClient(cfg.Concurrency),
		RequestTimeout:   cfg.RequestTimeout,
		MaxResponseBytes: int64(cfg.MaxResponseBytes),
		UserAgent:        "readsync/" + build.Version,
		MaxRetries:       cfg.MaxRetries,
		RetryBackoff:     cfg.RetryBackoff,
		RateLimit:        cfg.RateLimit,
		Logger:           log,
		CredentialsHint:  "check READSYNC_CLIENT_ID and READSYNC_CLIENT_SECRET",
		Observe:          observe,
	})
}

// stores is where a writing mode puts rows: ClickHouse, and the spool for
// what ClickHouse does not take.
type stores struct {
	ch    *clickhouse.ClickHouse
	spool *spool.Spool
}

// Close disconnects from ClickHouse and then releases the spool, whose
// lock tells other processes the directory is in use.
func (s stores) Close() {
	s.ch.Close()
	s.spool.Close()
}

// openStores opens the spool and connects to ClickHouse. An unwritable
// spool is a configuration error; an unreachable ClickHouse is not an
// error at all: rows are spooled and the schema is created on the first
// write that reaches the server.
func (a *app) openStores(ctx context.Context) (stores, error) {
	st, err := a.openUnmigrated(ctx)
	if err != nil {
		return st, err
	}
	a.migrateNow(ctx, st.ch)
	return st, nil
}

// migrateNow applies pending migrations (applyMigrations) within the time
// the one-time fold of existing history into the dashboard rollups takes
// (about half a minute per 70M snapshot rows); an unreachable server
// fails within the DSN's dial timeout instead.
func (a *app) migrateNow(ctx context.Context, ch *clickhouse.ClickHouse) {
	mctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	a.applyMigrations(mctx, ch)
}

// openUnmigrated opens the spool and ClickHouse, as openStores does, but
// applies no migration: the caller does, or the first write does.
func (a *app) openUnmigrated(ctx context.Context) (stores, error) {
	sp, err := spool.Open(a.cfg.SpoolDir, int64(a.cfg.SpoolMaxBytes), a.log)
	if err != nil {
		return stores{}, fmt.Errorf("READSYNC_SPOOL_DIR: %w", err)
	}
	if st := sp.Stats(); st.Entries > 0 || st.Quarantined > 0 {
		a.log.Info("spool holds entries from an earlier run", "dir", sp.Dir(), "entries", st.Entries, "bytes", st.Bytes, "quarantined", st.Quarantined)
	}
	var opts []clickhouse.Option
	if a.cfg.Migrations == config.MigrationsWait {
		opts = append(opts, clickhouse.WithSchemaFromElsewhere())
	}
	ch, err := a.openClickHouse(ctx, opts...)
	if err != nil {
		sp.Close()
		return stores{}, fmt.Errorf("READSYNC_CLICKHOUSE_DSN: %w", err)
	}
	ch.ObserveInserts(a.metrics.ObserveInsert)
	a.metrics.ObserveSpool(sp)
	return stores{ch: ch, spool: sp}, nil
}

// applyMigrations applies pending migrations, and says what stands in the way when
// it cannot: a server that does not answer, or one that refuses, or with
// READSYNC_MIGRATIONS=wait migrations another process has not applied yet.
// Either way rows go to the spool until a later attempt succeeds.
func (a *app) applyMigrations(ctx context.Context, ch *clickhouse.ClickHouse) bool {
	err := ch.Migrate(ctx)
	a.metrics.ObserveDelivery(err)
	if err == nil {
		return true
	}
	if behind := (*clickhouse.SchemaBehindError)(nil); errors.As(err, &behind) {
		a.log.Info("waiting for the schema: readsync --migrate applies the migrations (READSYNC_MIGRATIONS=wait); rows will be spooled until then",
			"applied", behind.Applied, "latest", behind.Latest, "pending", strings.Join(behind.Pending, ", "))
		return false
	}
	if fix, refused := sink.Refused(err); refused {
		a.log.Error("ClickHouse refused a migration; rows will be spooled until that is fixed", "err", err, "fix", fix)
	} else {
		a.log.Warn("ClickHouse unavailable; rows will be spooled until it answers", "err", err)
	}
	return false
}

// flushSpool replays spooled entries into ClickHouse. A failure is logged
// and left for the next attempt: the entries stay on disk.
func (a *app) flushSpool(ctx context.Context, s stores) {
	if s.spool.Stats().Entries == 0 {
		return
	}
	n, err := s.spool.Flush(ctx, s.ch)
	left := s.spool.Stats()
	if err != nil {
		a.log.Warn("spool not flushed; entries kept for the next attempt", "flushed", n, "entries_left", left.Entries, "err", err)
		return
	}
	a.log.Info("spool flushed", "flushed", n, "entries_left", left.Entries)
}

// replaySpool is --flush-spool: it replays the spool into ClickHouse,
// with retry the quarantined entries first, and exits 0 when the spool and
// its quarantine are empty afterwards, 3 when entries remain in either.
func (a *app) replaySpool(ctx context.Context, retry bool) int {
	st, err := a.openStores(ctx)
	if err != nil {
		return a.configFailed(err)
	}
	defer st.Close()
	if retry {
		a.retryQuarantined(ctx, st)
	}
	a.flushSpool(ctx, st)
	a.reconcile(ctx, st.ch)
	waits := a.spoolWaits(st)
	if a.quarantineWaits(st.spool) || waits {
		return ExitSpooled
	}
	a.log.Info("spool empty", "dir", st.spool.Dir())
	return ExitOK
}

// retryQuarantined replays the entries of the spool's quarantine once.
// What stays there, the spool has logged.
func (a *app) retryQuarantined(ctx context.Context, s stores) {
	if s.spool.Stats().Quarantined == 0 {
		a.log.Info("no quarantined spool entry to retry", "dir", s.spool.Dir())
		return
	}
	n, err := s.spool.RetryQuarantined(ctx, s.ch)
	left := s.spool.Stats().Quarantined
	if err != nil {
		a.log.Warn("quarantined spool entries not all retried; they stay for the next attempt", "delivered", n, "quarantined_left", left, "err", err)
		return
	}
	a.log.Info("quarantined spool entries retried", "delivered", n, "quarantined_left", left)
}

// quarantineWaits reports whether entries wait in the spool's quarantine
// and, when they do, says where and what to do: they are not replayed
// until an operator asks.
func (a *app) quarantineWaits(sp *spool.Spool) bool {
	n := sp.Stats().Quarantined
	if n == 0 {
		return false
	}
	a.log.Warn("spool entries wait in quarantine: ClickHouse refused what they hold, or they cannot be read; "+
		"the log's ERROR lines name each one and why, and `readsync --flush-spool --retry-quarantined` tries them again once the cause is fixed",
		"dir", sp.QuarantineDir(), "entries", n)
	return true
}

// spoolWaits reports whether entries wait in the spool and, when they
// do, says where and how to deliver them: the operator's next step after
// exit code 3.
func (a *app) spoolWaits(st stores) bool {
	left := st.spool.Stats()
	if left.Entries == 0 {
		return false
	}
	a.log.Warn("rows wait in the spool: deliver them with `readsync --flush-spool` once ClickHouse answers",
		"dir", st.spool.Dir(), "entries", left.Entries, "bytes", left.Bytes)
	return true
}

// runPass runs one pass and records it in the metrics.
func (a *app) runPass(ctx context.Context, syncer *sync.Syncer, p sync.Pass) (sync.Report, error) {
	start := time.Now()
	rep, err := syncer.Run(ctx, p)
	a.metrics.ObservePass(rep, time.Since(start))
	return rep, err
}

// reconcile refreshes the derived rows of whatever changed in the stored
// history up to now, a bounded step at a time (see
// clickhouse.ClickHouse.Reconcile): what a one-off command does before it
// exits. It fails nothing: what it could not do, the next reconcile does.
func (a *app) reconcile(ctx context.Context, ch *clickhouse.ClickHouse) {
	if !ch.Migrated() {
		return // nothing was written: the rows went to the spool
	}
	start := time.Now()
	rep, err := ch.Reconcile(ctx)
	a.metrics.ObserveReconcile(rep, err)
	if err != nil {
		a.log.Warn("derived history not reconciled; the next reconcile tries again", "err", err)
		return
	}
	a.log.Info("derived history reconciled", "steps", rep.Steps, "changed_snapshots", rep.ChangedSnapshots, "changed_ticks", rep.ChangedTicks, "left_to_writers", rep.LeftToWriters,
		"refreshed", rep.Refreshed, "rewritten", rep.Rewritten, "duration_ms", time.Since(start).Milliseconds())
}

func (a *app) syncer(s sink.Writer, sp sync.Spool) *sync.Syncer {
	spillDir := "" // a dry run has no spool directory; the system's temporary one serves
	if sp != nil {
		// In a container the spool directory is the one volume known to
		// be writable and sized for rows.
		spillDir = a.cfg.SpoolDir
	}
	return sync.New(sync.Config{
		SpillDir:     spillDir,
		Source:       a.api,
		Sink:         s,
		Spool:        sp,
		WriteBackoff: a.cfg.RetryBackoff,
		Concurrency:  a.cfg.Concurrency,
		BatchRows:    a.cfg.BatchRows,
		BatchTimeout: a.cfg.BatchTimeout,
		Location:     a.cfg.Location,
		Logger:       a.log,
		// One gauge for every pass: the upstream is one, whichever
		// schedule finds it down.
		ObserveBreaker: a.metrics.ObserveBreaker,
	})
}

// withGrace returns a context for passes that outlives parent by grace:
// when parent ends (a signal), the passes keep going for grace and are then
// cancelled with sync.ErrShutdown, which sends their fetched rows to the
// spool.
func withGrace(parent context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stop := context.AfterFunc(parent, func() {
		t := time.AfterFunc(grace, func() {
			cancel(fmt.Errorf("cut off by shutdown after the grace of %s: %w", grace, sync.ErrShutdown))
		})
		context.AfterFunc(ctx, func() { t.Stop() })
	})
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// Main runs readsync as a process: the signals that stop it, the garbage
// collector's setting, os.Args and the process environment and streams.
// It returns the exit code, which only main passes to os.Exit.
func Main(build Build) int {
	if _, set := os.LookupEnv("GOGC"); !set {
		// A pass waits on the network; spending a little more CPU on
		// garbage collection keeps peak memory near the live batches
		// instead of twice them. GOGC in the environment overrides this.
		debug.SetGCPercent(50)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, build, os.Args[1:], config.OSEnviron(), os.Stdout, os.Stderr)
}
