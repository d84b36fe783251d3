package app

import (
	"context"
	"fmt"
	"time"

	"github.com/readsync/readsync/internal/config"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/expiry"
	"github.com/readsync/readsync/sink/schema"
)

// retentions are the configured retentions, by resolution.
func (a *app) retentions() map[schema.Resolution]config.Retention {
	return map[schema.Resolution]config.Retention{schema.Raw: a.cfg.RetainRaw, schema.Hourly: a.cfg.RetainHourly, schema.Daily: a.cfg.RetainDaily}
}

// retention is the expiry policy of the configured retentions.
func (a *app) retention() expiry.Policy {
	p := expiry.Policy{}
	for r, d := range a.retentions() {
		p[r] = d.Duration()
	}
	return p
}

// expire is --expire: it drops once the partitions whose rows are all
// older than their resolution's retention (READSYNC_RETAIN_RAW, _HOURLY, _DAILY), printing a
// line per partition, and exits 0 when done, 1 when a drop or ClickHouse
// failed. With dryRun it prints what it would drop and drops nothing.
// With no retention set it drops nothing and says so.
func (a *app) expire(ctx context.Context, dryRun bool) int {
	ch, err := a.openClickHouse(ctx)
	if err != nil {
		return a.configFailed(fmt.Errorf("READSYNC_CLICKHOUSE_DSN: %w", err))
	}
	defer ch.Close()
	p := a.retention()
	for _, r := range schema.Resolutions() {
		keep := "forever"
		if d := a.retentions()[r]; d > 0 {
			keep = "for " + d.String()
		}
		fmt.Fprintf(a.stdout, "expire: %s rows are kept %s\n", r, keep)
	}
	var plan expiry.Plan
	var dropped []expiry.Partition
	if dryRun {
		if plan, err = ch.PlanExpiry(ctx, p); err == nil {
			dropped = plan.Drops
		}
	} else {
		var rep expiry.Report
		rep, err = ch.Expire(ctx, p, "")
		plan, dropped = rep.Plan, rep.Dropped
		if rep.Waiting {
			fmt.Fprintln(a.stdout, "expire: the move of message_read_snapshots onto its sort key is under way; expiry waits for it to finish")
		}
	}
	verb := "dropped"
	if dryRun {
		verb = "would drop"
	}
	var rows, bytes uint64
	for _, part := range dropped {
		fmt.Fprintf(a.stdout, "expire: %s %s partition %s: %d rows, %d bytes, up to %s\n", verb, part.Table, part.ID, part.Rows, part.Bytes, part.Newest.Format(time.RFC3339))
		rows += part.Rows
		bytes += part.Bytes
	}
	for _, part := range plan.Held {
		fmt.Fprintf(a.stdout, "expire: kept %s partition %s: %d rows up to %s, past the retention, hold changes the reconcile has not read (the first at %s); the first run after it reads them drops it\n",
			part.Table, part.ID, part.Rows, part.Newest.Format(time.RFC3339), plan.Unread[part.Table].Format(time.RFC3339))
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "readsync: expire: %s\n", sink.Describe(err))
		return ExitFailed
	}
	for _, r := range schema.Resolutions() {
		if cut, ok := plan.Cutoffs[r]; ok {
			fmt.Fprintf(a.stdout, "expire: %s rows older than %s expire\n", r, cut.Format(time.RFC3339))
		}
	}
	fmt.Fprintf(a.stdout, "expire: %s %d partitions, %d rows, %d bytes\n", verb, len(dropped), rows, bytes)
	return ExitOK
}

// withinRetention refuses a backfill stamped before the raw retention
// (READSYNC_RETAIN_RAW) from now: the next expiry would drop its rows,
// leaving only what the rollups made of them.
func (a *app) withinRetention(snapshotAt, now time.Time) error {
	keep := a.cfg.RetainRaw
	if snapshotAt.IsZero() || keep == 0 || !snapshotAt.Before(now.Add(-keep.Duration())) {
		return nil
	}
	return fmt.Errorf("--snapshot-at %s: older than READSYNC_RETAIN_RAW=%s (raw rows before %s expire): the next expiry would drop its rows; "+
		"stamp it within the retention, or raise READSYNC_RETAIN_RAW", snapshotAt.Format(time.RFC3339), keep, now.Add(-keep.Duration()).UTC().Format(time.RFC3339))
}
