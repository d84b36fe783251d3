package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// The status page's reads of sync_runs and expiries follow their sort
// keys: with three months of a pass a minute and an expiry an hour stored,
// each reads at most 1.2 times what it reads with a week, or 8 192 rows (a
// granule of expiries, whose week and months both fit in one; sync_runs
// reads a granule of 1 024 rows of each monthly part the range touches),
// as the server counts them; and each finds the last pass and the last
// expiry.
func TestStatusReadsNoMonthsOfHistory(t *testing.T) {
	t.Parallel()
	week := statusReads(t, 7)
	months := statusReads(t, 90)
	t.Logf("rows read with a week and with three months stored:\n%s", sinktest.Report(week, months))
	for _, text := range sinktest.Grown(week, months, 8192) {
		t.Errorf("with 90 days stored, %d rows read (over 1.2 times the %d with 7) by\n%s", months[text], week[text], text)
	}
}

// statusReads stores days of a pass a minute of one schedule and of
// another shard's, and of an expiry run an hour with a drop a day, and
// returns what the server read for the status page's last passes and last
// expiry, by statement.
func statusReads(t *testing.T, days int) map[string]uint64 {
	t.Helper()
	db := sinktest.New(t)
	costs := sinktest.NewCosts()
	ch := historytest.OpenSink(t, db.DSN, clickhouse.WithIntercept(costs.Wrap))
	ctx := context.Background()
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Minute).Unix()
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s (run_id, schedule, trigger, snapshot_at, started_at, finished_at, nft_ok, nft_failed, status, shard)
SELECT concat('run-', toString(number)), 'every-minute', 'cron', toDateTime(%[2]d - 60 * intDiv(number, 2)), toDateTime(%[2]d - 60 * intDiv(number, 2)),
  toDateTime(%[2]d - 60 * intDiv(number, 2) + 7), 3, 1, 'partial', if(number %% 2 = 0, '0/2', '1/2')
FROM numbers(%[3]d)`, db.Table("sync_runs"), now, 2*1440*days),
		fmt.Sprintf(`INSERT INTO %s (started_at, owner, resolution, table, partition, kept_from, rows, bytes)
SELECT toDateTime(%[2]d - 3600 * number), if(number %% 24 = 5, 'readsync-1', 'readsync-0'), if(number %% 24 = 5, 'raw', ''),
  if(number %% 24 = 5, 'message_read_snapshots', ''), '', toDateTime(0), 0, 0
FROM numbers(%[3]d)`, db.Table("expiries"), now, 24*days),
	} {
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	costs.Take()
	runs, err := ch.LastPasses(ctx, "1/2", time.Unix(now, 0).Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r := runs["every-minute"]; len(runs) != 1 || r.Shard != "1/2" || r.StartedAt.Unix() != now || r.FinishedAt.Sub(r.StartedAt) != 7*time.Second ||
		r.NFTOK != 3 || r.NFTFailed != 1 || r.Status != "partial" {
		t.Errorf("with %d days: last passes %+v, want the pass of shard 1/2 started at %d", days, runs, now)
	}
	ex, err := ch.LastExpiry(ctx, time.Unix(now, 0).Add(-7*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if ex.LastRun.Unix() != now || ex.Owner != "readsync-0" || ex.LastDrop.Unix() != now-5*3600 || ex.Dropped != 7 {
		t.Errorf("with %d days: last expiry %+v, want a run at %d by readsync-0, the last drop 5 hours before, 7 in a week", days, ex, now)
	}
	stmts := costs.Take()
	costs.Read(t, db.Conn, stmts)
	return sinktest.ByText(stmts)
}
