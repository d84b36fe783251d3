package expiry_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/expiry"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
	"github.com/readsync/readsync/sink/verify"
)

// monthStart is the first instant of t's month, UTC, moved by months.
func monthStart(t time.Time, months int) time.Time {
	return time.Date(t.Year(), t.Month()+time.Month(months), 1, 0, 0, 0, 0, time.UTC)
}

// writeMonths writes passes every five days from the start of the month
// five months before now to yesterday: six partitions. A message of
// project 2 stops being listed in the second month, so its latest row is
// old; one of project 3 is left out of the lists from the third month to
// the fourth, so its previous row at its return is an old one.
func writeMonths(t *testing.T, ch *clickhouse.ClickHouse, now time.Time) {
	t.Helper()
	h := historytest.NewHistory(t, ch)
	first := monthStart(now, -5)
	for at := first.Add(12 * time.Hour); at.Before(now.Add(-24 * time.Hour)); at = at.Add(120 * time.Hour) {
		h.Deleted[[2]int64{2, 4}] = !at.Before(monthStart(now, -4))
		h.Deleted[[2]int64{3, 3}] = !at.Before(monthStart(now, -3).Add(20*24*time.Hour)) && at.Before(monthStart(now, -2).Add(15*24*time.Hour))
		h.Pass(at)
	}
}

// viewLines reads every row of the views, each a line, by view.
func viewLines(t *testing.T, db *sinktest.DB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for v, order := range map[string]string{schema.LatestView: "project_id, message_id", schema.DailyView: "project_id, day",
		schema.SnapshotView: "project_id, snapshot_at", schema.GainsView: "project_id, snapshot_at", schema.DailyGainsView: "project_id, day",
		schema.HourlyView: "project_id, hour", schema.HourlyGainsView: "project_id, hour"} {
		cols := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT name FROM system.columns WHERE database = '%s' AND table = '%s'", db.Name, v))
		for i, c := range cols {
			cols[i] = "ifNull(toString(" + c + "), 'NULL')"
		}
		out[v] = sinktest.Lines(t, db.Conn, "SELECT arrayStringConcat(["+strings.Join(cols, ", ")+"], '\t') FROM "+db.Table(v)+" ORDER BY "+order)
	}
	return out
}

// keptParts lists the names of the active parts of the snapshot table
// from the partition of the month of from on.
func keptParts(t *testing.T, db *sinktest.DB, from time.Time) []string {
	return sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT name FROM system.parts WHERE active AND database = '%s' AND table = 'message_read_snapshots' AND partition_id >= '%s' ORDER BY name",
		db.Name, from.Format("200601")))
}

// TestExpiryKeepsTheDerivedHistory expires the oldest months of a history
// of six, raw and daily each by its own retention, and holds what remains
// to what the issue asks: the raw rows beyond the retention are gone, the
// derived rows of the expired span are as they were, every view equals its
// brute force over what is kept, --repair changes nothing of the expired
// span, and the kept parts were not rewritten.
func TestExpiryKeepsTheDerivedHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ch, db := historytest.OpenTestSink(t)
	now := time.Now().UTC()
	writeMonths(t, ch, now)
	before := viewLines(t, db)

	// No retention: nothing expires, and nothing is recorded.
	rep, err := ch.Expire(ctx, expiry.Policy{}, "")
	if err != nil || len(rep.Dropped) > 0 {
		t.Fatalf("expire with no retention: dropped %d partitions, err %v", len(rep.Dropped), err)
	}
	if got := viewLines(t, db); !slices.Equal(got[schema.DailyView], before[schema.DailyView]) {
		t.Fatal("expire with no retention changed project_read_daily")
	}

	rawCut := monthStart(now, -2).Add(10 * 24 * time.Hour)
	hourlyCut := monthStart(now, -3).Add(5 * 24 * time.Hour)
	dailyCut := monthStart(now, -4).Add(5 * 24 * time.Hour)
	p := expiry.Policy{schema.Raw: now.Sub(rawCut), schema.Hourly: now.Sub(hourlyCut), schema.Daily: now.Sub(dailyCut)}
	plan, err := ch.PlanExpiry(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var planned []string
	for _, d := range plan.Drops {
		if d.Table == schema.SnapshotsTable.Name() || d.Table == schema.DailyRollup || d.Table == schema.HourlyRollup {
			planned = append(planned, d.Table+" "+d.ID)
		}
	}
	want := []string{
		"message_read_snapshots " + monthStart(now, -5).Format("200601"),
		"message_read_snapshots " + monthStart(now, -4).Format("200601"),
		"message_read_snapshots " + monthStart(now, -3).Format("200601"),
		"message_read_daily_rollup " + monthStart(now, -5).Format("200601"),
		"message_read_hourly_rollup " + monthStart(now, -5).Format("200601"),
		"message_read_hourly_rollup " + monthStart(now, -4).Format("200601"),
	}
	slices.Sort(planned)
	slices.Sort(want)
	if !slices.Equal(planned, want) {
		t.Fatalf("the plan drops %v, want %v", planned, want)
	}
	if n := db.Count(t, schema.SnapshotsTable.Name()); n == 0 {
		t.Fatal("the plan dropped rows")
	}
	// Merged first, so that no background merge renames a part between
	// the two looks.
	if err := db.Conn.Exec(ctx, "OPTIMIZE TABLE "+db.Table(schema.SnapshotsTable.Name())+" FINAL"); err != nil {
		t.Fatal(err)
	}
	parts := keptParts(t, db, monthStart(now, -2))

	rep, err = ch.Expire(ctx, p, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Dropped) != len(plan.Drops) {
		t.Errorf("dropped %d partitions, planned %d", len(rep.Dropped), len(plan.Drops))
	}
	edges, err := ch.ExpiryEdges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	edge := edges.Raw()
	if edge.Before(monthStart(now, -3)) || edge.After(monthStart(now, -2)) {
		t.Fatalf("the raw rows are kept from %s, want within the month before %s", edge, monthStart(now, -2))
	}
	if got := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT toString(count()) FROM %s WHERE snapshot_at < toDateTime(%d)", db.Table("message_read_snapshots"), edge.Unix())); got[0] != "0" {
		t.Errorf("%s raw rows before the edge %s remain", got[0], edge)
	}
	if got := keptParts(t, db, monthStart(now, -2)); !slices.Equal(got, parts) {
		t.Errorf("the kept parts changed: %v, were %v", got, parts)
	}
	if got := sinktest.Lines(t, db.Conn, fmt.Sprintf("SELECT toString(count()) FROM system.mutations WHERE database = '%s'", db.Name)); got[0] != "0" {
		t.Errorf("expiry ran %s mutations", got[0])
	}

	// Every derived row is as it was, but those of the expired
	// resolutions' partitions.
	expected := expectedAfter(before, edge, hourlyCut, dailyCut)
	assertViews(t, db, expected, "after expiry")

	vrep := historytest.AssertVerified(t, ch, time.Time{})
	if vrep.Expired.IsZero() || vrep.Given < historytest.Projects {
		t.Errorf("verify took %d snapshots as given, expired %s; want at least one a project", vrep.Given, vrep.Expired)
	}

	// A repair of the projects with the old message and the message
	// listed again changes nothing.
	diff := verify.ViewDiff{View: schema.GainsView, Missing: []verify.RowDiff{{Key: "test"}}, MissingRows: 1, Projects: []int64{2, 3}}
	if err := ch.Repair(ctx, verify.Report{Views: []verify.ViewDiff{diff}}); err != nil {
		t.Fatal(err)
	}
	assertViews(t, db, expected, "after a repair")
	historytest.AssertVerified(t, ch, time.Time{})
	historytest.AssertVerified(t, ch, now.Add(-72*time.Hour))
}

// expectedAfter is before without the rows of the partitions expiry
// drops: the raw rows' from before edge, the hourly and daily rows' from
// before the months of hourlyCut and dailyCut.
func expectedAfter(before map[string][]string, edge, hourlyCut, dailyCut time.Time) map[string][]string {
	out := map[string][]string{}
	for v, lines := range before {
		for _, l := range lines {
			cols := strings.Split(l, "\t")
			keep := true
			switch v {
			case schema.SnapshotView, schema.GainsView:
				at, _ := time.Parse(time.DateTime, cols[0])
				keep = !at.Before(edge)
			case schema.DailyView, schema.DailyGainsView:
				day, _ := time.Parse(time.DateOnly, cols[0])
				keep = !day.Before(monthStart(dailyCut, 0))
			case schema.HourlyView, schema.HourlyGainsView:
				hour, _ := time.Parse(time.DateTime, cols[0])
				keep = !hour.Before(monthStart(hourlyCut, 0))
			}
			if keep {
				out[v] = append(out[v], l)
			}
		}
	}
	return out
}

func assertViews(t *testing.T, db *sinktest.DB, want map[string][]string, when string) {
	t.Helper()
	got := viewLines(t, db)
	for v := range want {
		if !slices.Equal(got[v], want[v]) {
			t.Errorf("%s %s:\n%s", v, when, historytest.DiffLines(got[v], want[v]))
		}
	}
}

// TestExpiryOnEveryShard expires the oldest months of a history on the
// sharded cluster: each shard's local table loses the expired partitions
// and keeps the rest, and every view equals its brute force over what is
// kept.
func TestExpiryOnEveryShard(t *testing.T) {
	t.Parallel()
	c := sinktest.NewCluster(t, sinktest.Sharded)
	ctx := context.Background()
	ch := historytest.OpenCluster(t, c, 0)
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	writeMonths(t, ch, now)
	rawCut := monthStart(now, -2).Add(10 * 24 * time.Hour)
	rep, err := ch.Expire(ctx, expiry.Policy{schema.Raw: now.Sub(rawCut)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Dropped) == 0 {
		t.Fatal("expiry dropped nothing")
	}
	edges, err := ch.ExpiryEdges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, conn := range c.Conns {
		q := fmt.Sprintf("SELECT concat(toString(countIf(snapshot_at < toDateTime(%d))), ' ', toString(count())) FROM %s",
			edges.Raw().Unix(), c.Table("message_read_snapshots_local"))
		got := strings.Fields(sinktest.Lines(t, conn, q)[0])
		if got[0] != "0" || got[1] == "0" {
			t.Errorf("node %d keeps %s rows before the edge %s and %s in all; want none before and some after", i+1, got[0], edges.Raw(), got[1])
		}
	}
	historytest.AssertVerified(t, ch, time.Time{})
}

// TestExpiryHoldsUnreadChanges keeps the change logs' partitions past
// the raw retention while they hold changes the reconcile has not read: a
// reconcile that stalled longer than the retention still finds every
// change when it runs again. Once it has read them, the next run drops
// them.
func TestExpiryHoldsUnreadChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ch, db := historytest.OpenTestSink(t)
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	old := monthStart(now, -3).Add(36 * time.Hour)
	// Changes no reconcile has read, as the materialized views record
	// them, written months ago.
	for _, q := range []string{
		fmt.Sprintf("INSERT INTO %s (changed_at, project_id, snapshot_at) SELECT toDateTime(%d), 1, toDateTime(%d)",
			db.Table(schema.SnapshotChanges), old.Unix(), old.Unix()),
		fmt.Sprintf("INSERT INTO %s (changed_at, schedule, tick) SELECT toDateTime(%d), 'every-minute', toDateTime(%d)",
			db.Table(schema.TickChanges), old.Unix(), old.Unix()),
	} {
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	p := expiry.Policy{schema.Raw: 30 * 24 * time.Hour}
	logs := func(parts []expiry.Partition) []string {
		var out []string
		for _, part := range parts {
			if part.Table == schema.SnapshotChanges || part.Table == schema.TickChanges {
				out = append(out, part.Table+" "+part.ID)
			}
		}
		slices.Sort(out)
		return out
	}
	want := []string{schema.SnapshotChanges + " " + old.Format("200601"), schema.TickChanges + " " + old.Format("200601")}

	rep, err := ch.Expire(ctx, p, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := logs(rep.Held); !slices.Equal(got, want) {
		t.Errorf("before the reconcile, expiry held %v, want %v", got, want)
	}
	if got := logs(rep.Dropped); len(got) > 0 {
		t.Errorf("before the reconcile, expiry dropped %v", got)
	}
	for _, log := range []string{schema.SnapshotChanges, schema.TickChanges} {
		if n := sinktest.Lines(t, db.Conn, "SELECT toString(count()) FROM "+db.Table(log))[0]; n != "1" {
			t.Errorf("%s holds %s rows after expiry, want the 1 unread", log, n)
		}
	}

	if _, err := ch.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err = ch.Expire(ctx, p, ""); err != nil {
		t.Fatal(err)
	}
	if got := logs(rep.Held); len(got) > 0 {
		t.Errorf("after the reconcile, expiry held %v", got)
	}
	if got := logs(rep.Dropped); !slices.Equal(got, want) {
		t.Errorf("after the reconcile, expiry dropped %v, want %v", got, want)
	}
	for _, log := range []string{schema.SnapshotChanges, schema.TickChanges} {
		if n := sinktest.Lines(t, db.Conn, "SELECT toString(count()) FROM "+db.Table(log))[0]; n != "0" {
			t.Errorf("%s holds %s rows after the reconcile and expiry, want none", log, n)
		}
	}
}
