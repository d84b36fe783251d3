package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/readsync/readsync/internal/check"
	"github.com/readsync/readsync/sink/clickhouse"
)

// check is --check (see package check): exit 0 when every part is usable,
// 1 when one is not, 2 for configuration that cannot work. The log on
// stderr carries no retry warnings: the API's line counts the retries.
func (a *app) check(ctx context.Context, skipClickHouse, allNames bool) int {
	unknown := make([]string, len(a.cfg.Unknown))
	for i, u := range a.cfg.Unknown {
		unknown[i] = u.String()
	}
	outcome := check.Run(ctx, check.Config{
		Out:           a.stdout,
		SchedulesFile: a.cfg.SchedulesFile,
		Schedules:     a.cfg.Schedules,
		Unknown:       unknown,
		SpoolDir:      a.cfg.SpoolDir,
		SpoolMaxBytes: int64(a.cfg.SpoolMaxBytes),
		Member:        a.cfg.Member,
		Shares:        a.shares,
		APIBaseURL:    a.cfg.APIBaseURL,
		Concurrency:   a.cfg.Concurrency,
		NewAPI: func(observe func(op, outcome string, d time.Duration)) (check.Details, error) {
			return newAPIClient(a.build, a.cfg, slog.New(slog.DiscardHandler), observe)
		},
		OpenClickHouse: func(ctx context.Context) (*clickhouse.ClickHouse, error) { return a.openClickHouse(ctx) },
	}, skipClickHouse, allNames)
	switch outcome {
	case check.OK:
		return ExitOK
	case check.ConfigError:
		return ExitConfig
	}
	return ExitFailed
}
