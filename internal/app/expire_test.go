package app

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/sink/sinktest"
)

// --expire drops nothing with no retention set; with one, --dry-run says
// what it would drop and drops nothing, and --expire drops it. A backfill
// stamped before the raw retention is refused, and a retention of a bad
// form is a usage error.
func TestExpireFlag(t *testing.T) {
	t.Parallel()
	good := apitest.Project{ID: 1, NFT: "good.eth", Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 2, Percent: "50.00%"}}}
	f := newFixture(t, []string{"good.eth"}, apitest.WithProjects(good))
	now := time.Now().UTC().Truncate(time.Second)
	old, recent := now.Add(-100*24*time.Hour), now.Add(-time.Hour)
	for _, at := range []time.Time{old, recent} {
		if code, _, stderr := f.run(t, "--backfill", "--snapshot-at", at.Format(time.RFC3339)); code != ExitOK {
			t.Fatalf("backfill at %s: exit %d\n%s", at, code, stderr)
		}
	}
	rows := func() string {
		return sinktest.Lines(t, f.DB.Conn, "SELECT toString(count()) FROM "+f.DB.Table("message_read_snapshots"))[0]
	}

	code, stdout, stderr := f.run(t, "--expire")
	if code != ExitOK || !strings.Contains(stdout, "expire: raw rows are kept forever") || !strings.Contains(stdout, "expire: dropped 0 partitions") || rows() != "2" {
		t.Fatalf("--expire with no retention: exit %d, %s rows left\n%s%s", code, rows(), stdout, stderr)
	}

	f.Env["READSYNC_RETAIN_RAW"] = "60d"
	month := old.Format("200601")
	code, stdout, stderr = f.run(t, "--expire", "--dry-run")
	if code != ExitOK || !strings.Contains(stdout, "expire: would drop message_read_snapshots partition "+month+": 1 rows") || rows() != "2" {
		t.Fatalf("--expire --dry-run: exit %d, %s rows left\n%s%s", code, rows(), stdout, stderr)
	}
	code, stdout, stderr = f.run(t, "--expire")
	if code != ExitOK || !strings.Contains(stdout, "expire: dropped message_read_snapshots partition "+month+": 1 rows") || rows() != "1" {
		t.Fatalf("--expire: exit %d, %s rows left\n%s%s", code, rows(), stdout, stderr)
	}

	code, _, stderr = f.run(t, "--backfill", "--snapshot-at", now.Add(-61*24*time.Hour).Format(time.RFC3339))
	if code != ExitConfig || !strings.Contains(stderr, "older than READSYNC_RETAIN_RAW=60d") {
		t.Errorf("backfill before the retention: exit %d, want %d naming the retention\n%s", code, ExitConfig, stderr)
	}
	f.Env["READSYNC_RETAIN_RAW"] = "60 days"
	code, _, stderr = f.run(t, "--expire")
	if code != ExitConfig || !strings.Contains(stderr, `READSYNC_RETAIN_RAW="60 days": a duration such as 90d`) {
		t.Errorf("--expire with a bad retention: exit %d, want %d\n%s", code, ExitConfig, stderr)
	}
	for _, args := range [][]string{{"--expire", "--backfill"}, {"--expire", "--verify"}} {
		if code, _, stderr := f.run(t, args...); code != ExitConfig {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, ExitConfig, stderr)
		}
	}
}

// Two daemons with a raw retention start on a history that reaches back
// months: one of them expires it, recording each partition once, and
// the other leaves it to that one. An import of old history arrives
// while they run passes; a one-off --expire drops what of it is older
// than the retention, and every view then equals its brute force over
// what is kept. The size of the history is in the metrics.
func TestDaemonsExpireWhileAnImportArrives(t *testing.T) {
	t.Parallel()
	projects := apitest.Generate(6, 4, 35)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	if sinktest.Lacks(sinktest.SurvivesKilledClient) {
		f.Env["READSYNC_CLICKHOUSE_DSN"] = f.DB.NewProxy(t).DSN
	}
	f.WriteSchedules(t, "fast", "@every 2s", apptest.NamesOf(projects))
	f.Env["READSYNC_LOG_LEVEL"] = "info"
	f.Env["READSYNC_RETAIN_RAW"] = "60d"
	if code, _, stderr := f.run(t, "--backfill"); code != ExitOK {
		t.Fatalf("backfill: exit %d\n%s", code, stderr)
	}
	importDays := func(days int) {
		t.Helper()
		cols := sinktest.Lines(t, f.DB.Conn, fmt.Sprintf("SELECT name FROM system.columns WHERE database = '%s' AND table = 'message_read_snapshots'", f.DB.Name))
		exprs := slices.Clone(cols)
		for i, c := range cols {
			if c == "snapshot_at" {
				exprs[i] = "toDateTime(toUInt32(snapshot_at) - (number + 1) * 86400)"
			}
		}
		table := f.DB.Table("message_read_snapshots")
		q := fmt.Sprintf(`INSERT INTO %s (%s)
SELECT %s FROM (SELECT * FROM %s WHERE snapshot_at = (SELECT max(snapshot_at) FROM %s)) ARRAY JOIN range(%d) AS number`,
			table, strings.Join(cols, ", "), strings.Join(exprs, ", "), table, table, days)
		if err := f.DB.Conn.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	importDays(150)
	oldRows := func() string {
		return sinktest.Lines(t, f.DB.Conn, "SELECT toString(count()) FROM "+f.DB.Table("message_read_snapshots")+
			" WHERE snapshot_at < now() - INTERVAL 60 DAY AND toYYYYMM(snapshot_at) < toYYYYMM(now() - INTERVAL 60 DAY)")[0]
	}
	if oldRows() == "0" {
		t.Fatal("the import holds no row in a month past the retention")
	}

	var logs []*apptest.LockedBuffer
	var stops []func() int
	for _, pod := range []string{"readsync-0", "readsync-1"} {
		g := &fixture{&apptest.Fixture{Srv: f.Srv, DB: f.DB, Env: maps.Clone(f.Env), Secrets: f.Secrets}}
		g.Env["READSYNC_SHARD"] = pod + "/2"
		g.Env["READSYNC_SPOOL_DIR"] = filepath.Join(t.TempDir(), "spool")
		log, stop := g.startDaemon(t)
		logs, stops = append(logs, log), append(stops, stop)
	}
	apptest.Eventually(t, "the expiry of the months past the retention", func() bool { return oldRows() == "0" }, logs[0].String)
	base := apptest.ListenerURL(t, logs[0].String)
	apptest.Eventually(t, "the history's size in the metrics", func() bool {
		_, m := apptest.Get(t, base, "/metrics")
		return strings.Contains(m, `readsync_retention_seconds{resolution="raw"} 5.184e+06`) &&
			strings.Contains(m, `readsync_history_oldest_timestamp_seconds{resolution="raw"}`) &&
			strings.Contains(m, `readsync_table_rows{table="message_read_snapshots"}`)
	}, logs[0].String)

	// The import arrives while both run passes.
	importDays(150)
	if oldRows() == "0" {
		t.Fatal("the second import holds no row past the retention")
	}
	code, stdout, stderr := f.run(t, "--expire")
	if code != ExitOK || oldRows() != "0" {
		t.Fatalf("--expire under the daemons: exit %d, %s rows past the retention left\n%s%s", code, oldRows(), stdout, stderr)
	}
	// The daemons' reconcile refreshes what the import changed, after
	// its settle delay: then every view equals its brute force.
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, stdout, stderr := f.run(t, "--verify")
		if code == ExitOK && strings.Contains(stdout, "verify: skipped what expired") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("--verify under the daemons after the expiry: exit %d\n%s%s", code, stdout, stderr)
		}
		time.Sleep(2 * time.Second)
	}
	for i, stop := range stops {
		if code := stop(); code != ExitOK {
			t.Fatalf("daemon %d: exit %d\n%s", i, code, logs[i].String())
		}
	}
	var owners, twice uint64
	f.Query(t, "SELECT uniqExact(owner) FROM {db}.expiries WHERE table != '' AND owner != ''", &owners)
	f.Query(t, "SELECT count() FROM (SELECT table, partition, owner FROM {db}.expiries WHERE table != '' AND owner != '' GROUP BY table, partition, owner HAVING count() > 1)", &twice)
	if owners != 1 || twice != 0 {
		t.Errorf("the daemons' drops were recorded by %d owners, %d partitions twice; want one owner, each once", owners, twice)
	}
	if !strings.Contains(logs[0].String()+logs[1].String(), "expiry dropped partitions") {
		t.Error("no daemon logged the partitions it dropped")
	}
}
