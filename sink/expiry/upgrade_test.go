package expiry_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/expiry"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// A database at the schema before expiry and the hourly resolution
// (migrations 1 to 10), with a history and its derived rows, upgrades
// without losing a row: migration 12 folds its hours, the hourly views
// then equal their brute force like every other, migration 14 folds the
// names' failures by the hour and name_health shows what it showed
// before, and an expiry with no retention set drops nothing.
func TestUpgradeKeepsEveryRowAndFoldsTheHours(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := sinktest.New(t)
	historytest.MigrateFirst(t, db.DSN, 10)
	h := historytest.NewHistory(t, nil)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 30 {
		at := start.Add(time.Duration(i) * 97 * time.Minute) // several a day, some hours without
		for p := int64(1); p <= historytest.Projects; p++ {
			b := h.Fetch(p, at, h.NextVersion())
			historytest.InsertDirect(t, db, b)
		}
	}
	// The day rollup and the gains of the history as the release before
	// computed them.
	d, err := chconn.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := chconn.Open(d, chconn.Topology{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, schema.DayRefresh(conn.Names(), "")); err != nil {
		t.Fatal(err)
	}
	if err := derived.FoldGains(ctx, conn, slog.New(slog.DiscardHandler), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// The names of an hourly schedule over the last five hours, and in
	// March: name-3k fails at every pass, name-3k+1 at the last two only,
	// each failure written twice.
	now := time.Now().Unix() / 60 * 60
	failures := db.Table(schema.NameFailuresTable.Name())
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s (schedule, run_id, snapshot_at, shard, nft, stage, kind, http_status, attempts, error)
SELECT 'hourly', toString(p), toDateTime(at), '', concat('name-', toString(n)), 'details', if(n %% 2 = 0, 'http_5xx', 'timeout'),
    toUInt16(if(n %% 2 = 0, 500 + p, 0)), toUInt32(3), concat('pass ', toString(p))
FROM (SELECT number %% 30 AS n, intDiv(number, 30) AS p, toUInt32(%d - (4 - p) * 3600) AS at FROM numbers(150))
WHERE n %% 3 = 0 OR (n %% 3 = 1 AND p >= 3)`, failures, now),
		fmt.Sprintf(`INSERT INTO %s (schedule, run_id, snapshot_at, shard, nft, stage, kind, http_status, attempts, error)
SELECT 'hourly', 'march', toDateTime('2026-03-02 10:00:00'), '', concat('name-', toString(number)), 'list', 'decode', toUInt16(0), toUInt32(1), 'bad body'
FROM numbers(30)`, failures),
	} {
		for range 2 {
			if err := db.Conn.Exec(ctx, q); err != nil {
				t.Fatalf("%v\n%s", err, q)
			}
		}
	}
	q := fmt.Sprintf(`INSERT INTO %s (schedule, nft, snapshot_at)
SELECT 'hourly', concat('name-', toString(number %% 30)), toDateTime(toUInt32(%d - (4 - intDiv(number, 30)) * 3600))
FROM numbers(150) WHERE number %% 30 %% 3 = 2 OR (number %% 30 %% 3 = 1 AND intDiv(number, 30) < 3)`, db.Table(schema.NameSuccessesTable.Name()), now)
	if err := db.Conn.Exec(ctx, q); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	health := func() []string {
		return sinktest.Lines(t, db.Conn, "SELECT concat(schedule, ' ', nft, ' ', toString(last_success_at), ' ', toString(last_failure_at), ' ', last_error_kind, ' ', last_error, ' ', "+
			"toString(last_http_status), ' ', toString(failures_24h), ' ', toString(failing_passes)) AS r FROM "+db.Table(schema.NameHealthView)+" ORDER BY r")
	}
	healthBefore := health()
	if len(healthBefore) != 30 {
		t.Fatalf("name_health holds %d names before the upgrade, want 30:\n%s", len(healthBefore), strings.Join(healthBefore, "\n"))
	}

	counts := func() map[string]uint64 {
		out := map[string]uint64{}
		for _, table := range []string{schema.SnapshotsTable.Name(), schema.GainsRollup, schema.DayGainsRollup, schema.DailyRollup, "sync_runs",
			schema.NameFailuresTable.Name()} {
			out[table] = storedRows(t, db, table)
		}
		return out
	}
	before := counts()

	ch := historytest.OpenSink(t, db.DSN)
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := ch.Expire(ctx, expiry.Policy{}, ""); err != nil || len(rep.Dropped) != 0 {
		t.Fatalf("expiry with no retention: dropped %d partitions, err %v", len(rep.Dropped), err)
	}
	for table, n := range counts() {
		if n != before[table] {
			t.Errorf("%s holds %d rows after the upgrade, %d before", table, n, before[table])
		}
	}
	if n := storedRows(t, db, schema.HourGainsRollup); n == 0 {
		t.Fatal("migration 12 folded no hour's gains")
	}
	if got := health(); !slices.Equal(got, healthBefore) {
		t.Errorf("name_health after the upgrade:\n%s\nbefore:\n%s", strings.Join(got, "\n"), strings.Join(healthBefore, "\n"))
	}
	if n := sinktest.Lines(t, db.Conn, "SELECT toString(count()) FROM "+db.Table(schema.NameFailureHours)+" WHERE hour < toDateTime('2026-04-01 00:00:00')"); n[0] == "0" {
		t.Error("migration 14 folded no failure of March")
	}
	historytest.AssertVerified(t, ch, time.Time{})
}

// storedRows counts the rows stored in table, merged or not.
func storedRows(t *testing.T, db *sinktest.DB, table string) uint64 {
	t.Helper()
	var n uint64
	if err := db.Conn.QueryRow(context.Background(), "SELECT count() FROM "+db.Table(table)).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}
