package app

import (
	"context"
	"time"

	"github.com/readsync/readsync/internal/status"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/spool"
	"github.com/readsync/readsync/sync"
)

// statusExpiryLookBack is how far back the status page looks for the last
// expiry: the daemons run it every expiryInterval, so one missing from
// a day's record has not run for a while.
const statusExpiryLookBack = 7 * 24 * time.Hour

// statusBoard returns the status page's content, read from ch and sp:
// the daemon serves it from the start and runs its loop (Board.Loop)
// once the stores are open.
func (a *app) statusBoard(schedules []sync.Schedule, ch *clickhouse.ClickHouse, sp *spool.Spool) *status.Board {
	cfg := status.Config{
		Version:        a.build.Version,
		Database:       ch.Database(),
		Interval:       a.cfg.StatusInterval,
		PassLookBack:   passLookBack(schedules, time.Now()),
		ExpiryLookBack: statusExpiryLookBack,
		Log:            a.log,
		Local: func() status.Local {
			sh := a.metrics.Share()
			st := sp.Stats()
			return status.Local{Shard: sh.String(), ShardLabel: sh.Label(),
				Spool: status.Spool{Entries: st.Entries, Bytes: st.Bytes, Quarantined: st.Quarantined}}
		},
		SpoolOldest: sp.Oldest,
	}
	for _, s := range schedules {
		cfg.Schedules = append(cfg.Schedules, status.ScheduleConfig{Name: s.Name, Cron: s.Cron, Next: s.Spec.Next})
	}
	for _, r := range schema.Resolutions() {
		keep := "forever"
		if d := a.retentions()[r]; d.Duration() > 0 {
			keep = d.String()
		}
		cfg.Retentions = append(cfg.Retentions, status.Retention{Resolution: string(r), Keep: keep})
	}
	cfg.Read = func(ctx context.Context, shard string) (status.Stored, error) {
		return a.readStatus(ctx, ch, shard, cfg.PassLookBack)
	}
	return status.NewBoard(cfg)
}

// passLookBack is how far back the status page looks for the schedules'
// last passes: two of the longest period between ticks, and at least an
// hour, so that the read follows sync_runs' sort key over a range that
// holds the last pass of a schedule that runs.
func passLookBack(schedules []sync.Schedule, now time.Time) time.Duration {
	longest := time.Hour
	for _, s := range schedules {
		next := s.Spec.Next(now)
		longest = max(longest, 2*s.Spec.Next(next).Sub(next))
	}
	return longest
}

// readStatus reads what the status page shows from ClickHouse: the
// server, the schema's migrations, the last passes of the share shard,
// the failing names and the last expiry.
func (a *app) readStatus(ctx context.Context, ch *clickhouse.ClickHouse, shard string, lookBack time.Duration) (status.Stored, error) {
	var st status.Stored
	release, err := ch.Ping(ctx)
	if err != nil {
		return st, err
	}
	st.ServerVersion = release
	v, err := ch.SchemaVersion(ctx)
	if err != nil {
		return st, err
	}
	st.Migration, st.Latest, st.Pending = v.Applied, v.Latest, v.Pending
	if !v.Current() {
		// The page's other reads need the schema's tables and views.
		return st, nil
	}
	now := time.Now()
	runs, err := ch.LastPasses(ctx, shard, now.Add(-lookBack))
	if err != nil {
		return st, err
	}
	st.LastPasses = map[string]status.Pass{}
	for name, r := range runs {
		st.LastPasses[name] = status.Pass{SnapshotAt: r.SnapshotAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
			DurationSeconds: r.FinishedAt.Sub(r.StartedAt).Seconds(), Status: r.Status,
			NamesOK: r.NFTOK, NamesFailed: r.NFTFailed, Messages: r.Messages, Error: r.Error}
	}
	counts, err := ch.NamesFailing(ctx, uint64(a.cfg.NamesNotReadPasses))
	if err != nil {
		return st, err
	}
	st.Counts = map[string]status.Counts{}
	for s, c := range counts {
		st.Counts[s] = status.Counts{Failing: c.Failing, NotRead: c.NotRead}
	}
	names, err := ch.TopFailingNames(ctx, status.MaxFailing)
	if err != nil {
		return st, err
	}
	for _, h := range names {
		n := status.Name{Schedule: h.Schedule, NFT: h.NFT, FailingPasses: h.FailingPasses, Kind: h.LastErrorKind,
			LastError: h.LastError, LastHTTPStatus: h.LastHTTPStatus, LastFailureAt: h.LastFailureAt, Failures24h: h.Failures24h}
		if h.LastSuccessAt.Unix() > 0 {
			at := h.LastSuccessAt
			n.LastSuccessAt = &at
		}
		st.Failing = append(st.Failing, n)
	}
	ex, err := ch.LastExpiry(ctx, now.Add(-statusExpiryLookBack))
	if err != nil {
		return st, err
	}
	st.Expiry = status.ExpiryRuns{LastRun: ex.LastRun, LastDrop: ex.LastDrop, Owner: ex.Owner, Dropped: ex.Dropped}
	return st, nil
}
