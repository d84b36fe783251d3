package expiry_test

import (
	"context"
	"log/slog"
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
// then equal their brute force like every other, and an expiry with no
// retention set drops nothing.
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
	counts := func() map[string]uint64 {
		out := map[string]uint64{}
		for _, table := range []string{schema.SnapshotsTable.Name(), schema.GainsRollup, schema.DayGainsRollup, schema.DailyRollup, "sync_runs"} {
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
