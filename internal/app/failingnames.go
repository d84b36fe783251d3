package app

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
)

// failingNames is --failing-names: it prints the names failing now, as
// the view name_health says (failing_passes > 0), of the schedule when
// one is given, those failing the most passes in a row first: one a line,
// tab-separated (schedule, nft, passes in a row, kind, last error), or
// with asJSON one JSON object a line with the view's columns. It exits 0
// when no name is failing and 1 when some are, or when ClickHouse could
// not answer (as --verify does).
func (a *app) failingNames(ctx context.Context, schedule string, asJSON bool) int {
	if err := a.knownSchedule(schedule); err != nil {
		fmt.Fprintf(a.stderr, "readsync: %v\n", err)
		return ExitConfig
	}
	ch, err := a.openClickHouse(ctx)
	if err != nil {
		return a.configFailed(fmt.Errorf("READSYNC_CLICKHOUSE_DSN: %w", err))
	}
	defer ch.Close()
	var only *string
	if schedule != "" {
		only = &schedule
	}
	enc := json.NewEncoder(a.stdout)
	failing := 0
	err = ch.FailingNames(ctx, only, func(h clickhouse.NameHealth) error {
		failing++
		if asJSON {
			return enc.Encode(h) // times in RFC 3339, UTC
		}
		_, err := fmt.Fprintf(a.stdout, "%s\t%s\t%d\t%s\t%s\n", h.Schedule, h.NFT, h.FailingPasses, h.LastErrorKind, h.LastError)
		return err
	})
	if err != nil {
		fmt.Fprintf(a.stderr, "readsync: failing names: %s\n", sink.Describe(err))
		return ExitFailed
	}
	if failing > 0 {
		return ExitFailed
	}
	return ExitOK
}
