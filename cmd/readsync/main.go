// Command readsync exports the messaging platform's project and message read
// statistics into ClickHouse: as a daemon on cron schedules, or as a one-off
// backfill.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	_ "time/tzdata" // READSYNC_SOURCE_TIMEZONE must resolve in images without a zone database

	"github.com/sethvargo/go-envconfig"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// Stamped at build time with -ldflags "-X main.version=… -X main.commit=…".
var (
	version = "dev"
	commit  = "unknown"
)

// Exit codes; they are a contract with schedulers and scripts.
const (
	exitOK     = 0 // every name synced
	exitFailed = 1 // at least one name failed, or the run could not complete
	exitConfig = 2 // bad configuration or usage
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], envconfig.OsLookuper(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program; main only supplies the process's context,
// arguments, environment and streams.
func run(ctx context.Context, args []string, lookup envconfig.Lookuper, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "readsync: %v\n", err)
		return exitConfig
	}
	if f.version {
		fmt.Fprintf(stdout, "readsync %s (commit %s, %s)\n", version, commit, runtime.Version())
		return exitOK
	}
	cfg, err := loadConfig(ctx, lookup, !f.dryRun)
	if err != nil {
		fmt.Fprintf(stderr, "readsync: configuration: %v\n", err)
		return exitConfig
	}
	a, err := newApp(cfg, newLogger(stderr, cfg.LogLevel, cfg.LogFormat), stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "readsync: configuration: %v\n", err)
		return exitConfig
	}
	switch {
	case f.check:
		return a.check(ctx, f.dryRun)
	case f.backfill:
		return a.backfill(ctx, f)
	default:
		return a.daemon(ctx)
	}
}

// app holds what every mode shares: configuration, the logger and the one
// API client of the process.
type app struct {
	cfg    *config
	log    *slog.Logger
	api    *apiclient.Client
	stdout io.Writer
	stderr io.Writer
}

func newApp(cfg *config, log *slog.Logger, stdout, stderr io.Writer) (*app, error) {
	api, err := apiclient.New(apiclient.Config{
		BaseURL:          cfg.APIBaseURL,
		ClientID:         cfg.ClientID,
		ClientSecret:     string(cfg.ClientSecret),
		HTTPClient:       apiclient.NewHTTPClient(cfg.Concurrency),
		RequestTimeout:   cfg.RequestTimeout,
		MaxResponseBytes: int64(cfg.MaxResponseBytes),
		UserAgent:        "readsync/" + version,
		MaxRetries:       cfg.MaxRetries,
		RetryBackoff:     cfg.RetryBackoff,
		RateLimit:        cfg.RateLimit,
		Logger:           log,
	})
	if err != nil {
		return nil, err
	}
	return &app{cfg: cfg, log: log, api: api, stdout: stdout, stderr: stderr}, nil
}

// openClickHouse connects and migrates, so that every mode that writes
// finds its tables.
func (a *app) openClickHouse(ctx context.Context) (*sink.ClickHouse, error) {
	ch, err := sink.OpenClickHouse(ctx, a.cfg.DSN)
	if err != nil {
		return nil, err
	}
	if err := ch.Migrate(ctx); err != nil {
		ch.Close()
		return nil, err
	}
	return ch, nil
}

func (a *app) syncer(s sync.Sink) *sync.Syncer {
	return sync.New(sync.Config{
		Source:      a.api,
		Sink:        s,
		Concurrency: a.cfg.Concurrency,
		BatchRows:   a.cfg.BatchRows,
		Location:    a.cfg.Location,
		Logger:      a.log,
	})
}
