package app

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/internal/config"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// newTestApp builds the app run would build from the fixture's
// environment, logging to log.
func (f *fixture) newTestApp(t *testing.T, log io.Writer) *app {
	t.Helper()
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(f.Env), config.Needs{API: true, DSN: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(testBuild, cfg, config.Needs{API: true, DSN: true}, newLogger(log, cfg.LogLevel, "json"), io.Discard, log)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// openTestStores opens the app's stores for the rest of the test.
func openTestStores(t *testing.T, a *app) stores {
	t.Helper()
	st, err := a.openStores(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// backlog spools rows of a project the upstream does not know, as if an
// earlier outage had left them.
func backlog(t *testing.T, st stores, entries int) {
	t.Helper()
	at := sink.TimeOf(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	for i := range entries {
		b := &sink.Batch{Snapshots: []sink.Snapshot{{ProjectID: 77, MessageID: int64(i), SnapshotAt: at, FetchedAt: at, Version: 1}}}
		if err := st.spool.PutBatch(b); err != nil {
			t.Fatal(err)
		}
	}
}

// A cron pass writes its own snapshots and leaves the spool alone: a
// backlog is the background flusher's, and replaying it inside the pass
// would spend the time the pass has until its next tick.
func TestCronPassLeavesTheSpoolToTheFlusher(t *testing.T) {
	projects := apitest.Generate(2, 3, 21)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	log := &apptest.LockedBuffer{}
	a := f.newTestApp(t, log)
	st := openTestStores(t, a)
	backlog(t, st, 3)

	tick := time.Now().UTC().Truncate(time.Second)
	a.cronPass(context.Background(), a.syncer(st.ch, st.spool), sync.NewResolver(st.ch), a.cfg.Schedules[0], tick)

	if n := st.spool.Stats().Entries; n != 3 {
		t.Errorf("the pass left %d of the 3 spooled entries; log:\n%s", n, log.String())
	}
	var snaps uint64
	f.Query(t, "SELECT count() FROM {db}.message_read_snapshots WHERE project_id != 77", &snaps)
	if snaps != snapshotsOf(projects) {
		t.Errorf("%d snapshots of the pass written, want %d", snaps, snapshotsOf(projects))
	}
}

// The daemon replays what an earlier process spooled as soon as it starts,
// in the background, without waiting for a tick or a flush interval.
func TestDaemonFlushesTheSpoolAtStart(t *testing.T) {
	projects := apitest.Generate(1, 2, 22)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	f.WriteSchedules(t, "yearly", "0 0 1 1 *", apptest.NamesOf(projects))
	f.Env["READSYNC_SPOOL_FLUSH_INTERVAL"] = "1h"
	a := f.newTestApp(t, io.Discard)
	st, err := a.openStores(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	backlog(t, st, 2)
	st.Close()

	log, stop := f.startDaemon(t)
	apptest.Eventually(t, "the spool flushed", func() bool { return len(spoolEntries(t, f.Env["READSYNC_SPOOL_DIR"])) == 0 }, log.String)
	apptest.WaitStarted(t, log.String)
	if code := stop(); code != ExitOK {
		t.Fatalf("daemon exit %d; log:\n%s", code, log.String())
	}
	var snaps uint64
	f.Query(t, "SELECT count() FROM {db}.message_read_snapshots WHERE project_id = 77", &snaps)
	if snaps != 2 || !strings.Contains(log.String(), "spool flushed") {
		t.Errorf("%d spooled snapshots delivered, want 2; log:\n%s", snaps, log.String())
	}
}

// One process owns a spool directory: a second one exits 2 and names the
// directory, and --check still reports on it without touching a file,
// not even the unfinished entry the owner may be writing.
func TestSpoolHasOneOwner(t *testing.T) {
	projects := apitest.Generate(1, 2, 23)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	dir := f.Env["READSYNC_SPOOL_DIR"]
	a := f.newTestApp(t, io.Discard)
	st := openTestStores(t, a)
	backlog(t, st, 1)
	writing := filepath.Join(dir, ".tmp-owner-is-writing")
	if err := os.WriteFile(writing, []byte("\x1f\x8b"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := dirListing(t, dir)

	code, _, stderr := f.run(t, "--backfill")
	if code != ExitConfig || !strings.Contains(stderr, "spool directory "+dir+" is in use by another readsync process") {
		t.Errorf("second process: exit %d, want 2 and a message naming %s:\n%s", code, dir, stderr)
	}
	code, stdout, stderr := f.run(t, "--check")
	if code != ExitOK || !strings.Contains(stdout, "spool: ok ("+dir+": 1 entries waiting") {
		t.Errorf("--check beside the owner: exit %d:\n%s%s", code, stdout, stderr)
	}
	if after := dirListing(t, dir); !slices.Equal(before, after) {
		t.Errorf("the spool directory changed: %v, then %v", before, after)
	}
}

func dirListing(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// Exit 3 says where the rows wait and how to deliver them; --flush-spool
// delivers them, exiting 3 while ClickHouse refuses and 0 once the spool
// is empty.
func TestFlushSpoolDeliversTheSpool(t *testing.T) {
	projects := apitest.Generate(3, 4, 24)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	proxy := f.DB.NewProxy(t)
	f.Env["READSYNC_CLICKHOUSE_DSN"] = proxy.DSN
	dir := f.Env["READSYNC_SPOOL_DIR"]

	proxy.Down()
	code, _, stderr := f.run(t, "--backfill")
	if code != ExitSpooled || !strings.Contains(stderr, "readsync --flush-spool") || !strings.Contains(stderr, `"dir":"`+dir+`"`) {
		t.Fatalf("backfill during the outage: exit %d, want 3 and the way to deliver %s:\n%s", code, dir, stderr)
	}
	if code, _, stderr := f.run(t, "--flush-spool"); code != ExitSpooled {
		t.Fatalf("--flush-spool during the outage: exit %d, want 3:\n%s", code, stderr)
	}

	proxy.Up()
	if code, _, stderr := f.run(t, "--flush-spool"); code != ExitOK {
		t.Fatalf("--flush-spool: exit %d, want 0:\n%s", code, stderr)
	}
	if left := spoolEntries(t, dir); len(left) != 0 {
		t.Errorf("spool still holds %v", left)
	}
	f.exactlyOnce(t, snapshotsOf(projects))
}

// A long list that breaks off mid-way leaves none of its project's
// snapshots at that tick, and the run counts each written snapshot once;
// the retried backfill writes them all, with one version.
func TestBrokenLongListLeavesNoSnapshots(t *testing.T) {
	projects := apitest.Generate(2, 6000, 25)
	projects[1].Messages = projects[1].Messages[:5]
	long := projects[0]
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...),
		apitest.WithListFault(long.ID, apitest.Truncated(0)))
	f.Env["READSYNC_BATCH_ROWS"] = "2000" // the list streams through in pieces of 250 rows
	f.Env["READSYNC_MAX_RETRIES"] = "1"
	at := "2026-06-01T10:00:00Z"

	code, _, stderr := f.run(t, "--backfill", "--snapshot-at", at)
	if code != ExitFailed {
		t.Fatalf("exit %d, want 1; log:\n%s", code, stderr)
	}
	var messages, snaps, runMessages uint64
	where := " WHERE project_id = " + itoa(uint64(long.ID))
	f.Query(t, "SELECT count() FROM {db}.messages"+where, &messages)
	if messages < 250 {
		t.Fatalf("%d message rows of the broken list written: nothing streamed, the test proves nothing", messages)
	}
	f.Query(t, "SELECT count() FROM {db}.message_read_snapshots"+where, &snaps)
	f.Query(t, "SELECT messages FROM {db}.sync_runs", &runMessages)
	if snaps != 0 || runMessages != 5 {
		t.Errorf("%d snapshots of the broken list, run counts %d: want none of the list and the other name's 5", snaps, runMessages)
	}

	f.Srv.SetListFault(long.ID, apitest.Fault{})
	if code, _, stderr := f.run(t, "--backfill", "--snapshot-at", at, "--nft", long.NFT); code != ExitOK {
		t.Fatalf("retry: exit %d; log:\n%s", code, stderr)
	}
	var versions uint64
	f.Query(t, "SELECT count(), uniqExact(version) FROM {db}.message_read_snapshots FINAL"+where, &snaps, &versions)
	f.Query(t, "SELECT messages FROM {db}.sync_runs WHERE nft_total = 1", &runMessages)
	if snaps != 6000 || versions != 1 || runMessages != 6000 {
		t.Errorf("%d snapshots with %d versions, run counts %d: want 6000 of one version", snaps, versions, runMessages)
	}
}

// A cron pass its next tick cuts off logs that once, with the deadline,
// and records the names it cut off as cut off by the next tick, not as
// request timeouts.
func TestCronPassCutOffByTheNextTick(t *testing.T) {
	projects := apitest.Generate(3, 2, 26)
	opts := []apitest.Option{apitest.WithProjects(projects...)}
	for _, p := range projects[1:] {
		opts = append(opts, apitest.WithFault(p.NFT, apitest.Slow(time.Minute)))
	}
	f := newFixture(t, apptest.NamesOf(projects), opts...)
	f.WriteSchedules(t, "fast", "@every 1s", apptest.NamesOf(projects))
	log := &apptest.LockedBuffer{}
	a := f.newTestApp(t, log)
	st := openTestStores(t, a)

	// A tick at the coming second leaves the fast name at least a second.
	tick := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	a.cronPass(context.Background(), a.syncer(st.ch, st.spool), sync.NewResolver(st.ch), a.cfg.Schedules[0], tick)

	next := tick.Add(time.Second).Format(time.RFC3339)
	var status, runErr string
	f.Query(t, "SELECT status, error FROM {db}.sync_runs", &status, &runErr)
	if want := "2 of 3 names failed: nft " + strconv.Quote(projects[1].NFT) + ", " + strconv.Quote(projects[2].NFT) +
		": cut off by the next tick at " + next; status != "partial" || runErr != want {
		t.Errorf("run recorded %s, %q; want partial, %q", status, runErr, want)
	}
	out := log.String()
	if strings.Count(out, "pass cut off") != 1 || strings.Contains(out, "name failed") || strings.Contains(out, "request timeout") ||
		!strings.Contains(out, `"deadline":"`+next+`"`) {
		t.Errorf("want one line saying the pass was cut off, with its deadline, and none per name:\n%s", out)
	}
}

// walletView is a view of the user's on projects that takes every wallet
// address for a number: ClickHouse refuses a project whose address is not
// one, for what the write holds, and takes every other write.
const walletView = "CREATE MATERIALIZED VIEW {db}.wallets ENGINE = MergeTree ORDER BY id " +
	"AS SELECT id, toUInt64(wallet_address) AS wallet FROM {db}.projects"

// exec runs a statement in the fixture's database, {db} standing for it.
func (f *fixture) exec(t *testing.T, q string) {
	t.Helper()
	q = strings.ReplaceAll(q, "{db}", "`"+f.DB.Name+"`")
	if err := f.DB.Conn.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// walletBatch is a project with the given wallet address, one message
// and its snapshot: 3 rows.
func walletBatch(project int64, wallet string) *sink.Batch {
	at := sink.TimeOf(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	return &sink.Batch{
		Projects:  []sink.Project{{ID: project, NFT: "wallet-" + wallet + ".eth", WalletAddress: wallet, CreateAt: at, FetchedAt: at, Version: 1}},
		Messages:  []sink.Message{{ProjectID: project, ID: 1, Receivers: []string{}, CreateAt: at, FetchedAt: at, Version: 1}},
		Snapshots: []sink.Snapshot{{ProjectID: project, MessageID: 1, SnapshotAt: at, FetchedAt: at, ReadCount: 1, Total: 2, Percent: 50, Version: 1}},
	}
}

// logLine returns the first JSON log line whose msg contains msg, decoded.
func logLine(t *testing.T, log, msg string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		if s, _ := m["msg"].(string); strings.Contains(s, msg) {
			return m
		}
	}
	t.Fatalf("no log line %q in:\n%s", msg, log)
	return nil
}

// A spool holding an entry ClickHouse refuses for what it holds between
// two it takes. --flush-spool delivers the good ones and exits 3; the
// daemon moves the bad one into quarantine/ at its third refusal, with an
// ERROR naming the file, its table, its rows and the server's message,
// and exports it; --check counts it. --retry-quarantined is a usage error
// alone; with --flush-spool it leaves the entry while the cause remains,
// and delivers it once the cause is gone. No row is lost on the way.
func TestRefusedSpoolEntryIsQuarantinedAndRetried(t *testing.T) {
	projects := apitest.Generate(1, 2, 27)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	f.WriteSchedules(t, "yearly", "0 0 1 1 *", apptest.NamesOf(projects))
	f.Env["READSYNC_SPOOL_FLUSH_INTERVAL"] = "100ms"
	dir := f.Env["READSYNC_SPOOL_DIR"]
	st, err := f.newTestApp(t, io.Discard).openStores(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []*sink.Batch{walletBatch(81, "81"), walletBatch(82, "0x52"), walletBatch(83, "83")} {
		if err := st.spool.PutBatch(b); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	f.exec(t, walletView)
	bad := spoolEntries(t, dir)[1]
	snapshots := func() []uint64 {
		var n [3]uint64
		for i := range n {
			f.Query(t, "SELECT count() FROM {db}.message_read_snapshots WHERE project_id = "+itoa(uint64(81+i)), &n[i])
		}
		return n[:]
	}

	code, _, stderr := f.run(t, "--flush-spool")
	if code != ExitSpooled || !slices.Equal(snapshots(), []uint64{1, 0, 1}) {
		t.Fatalf("--flush-spool: exit %d, snapshots of the three entries %v; want 3 and the two good ones delivered:\n%s", code, snapshots(), stderr)
	}
	if l := logLine(t, stderr, "refused a spooled entry for what it holds"); l["entry"] != bad || l["table"] != "projects" {
		t.Errorf("the refusal's warning does not name %s in projects: %v", bad, l)
	}

	log, stop := f.startDaemon(t)
	quarantined := filepath.Join(dir, "quarantine", bad)
	apptest.Eventually(t, "the refused entry moved aside", func() bool { _, err := os.Stat(quarantined); return err == nil }, log.String)
	// The count follows the move, once the directories are synced.
	var metrics string
	apptest.Eventually(t, "readsync_spool_quarantined_entries 1", func() bool {
		_, metrics = apptest.Get(t, apptest.ListenerURL(t, log.String), "/metrics")
		return strings.Contains(metrics, "\nreadsync_spool_quarantined_entries 1\n")
	}, func() string { return metrics })
	apptest.WaitStarted(t, log.String)
	if code := stop(); code != ExitOK {
		t.Fatalf("daemon exit %d", code)
	}
	l := logLine(t, log.String(), "moved aside")
	if l["level"] != "ERROR" || l["entry"] != bad || l["table"] != "projects" || l["rows"] != float64(3) ||
		!strings.Contains(l["err"].(string), "Cannot parse string '0x52'") {
		t.Errorf("the quarantine's line does not name the file %s, table projects, its 3 rows and the server's message: %v", bad, l)
	}

	if code, stdout, stderr := f.run(t, "--check"); code != ExitOK || !strings.Contains(stdout, "; 1 entries quarantined: readsync --flush-spool --retry-quarantined") {
		t.Errorf("--check: exit %d, want 0 and the quarantined entry counted:\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := f.run(t, "--retry-quarantined"); code != ExitConfig || !strings.Contains(stderr, "--retry-quarantined needs --flush-spool") {
		t.Errorf("--retry-quarantined alone: exit %d, want 2:\n%s", code, stderr)
	}
	code, _, stderr = f.run(t, "--flush-spool", "--retry-quarantined")
	if _, err := os.Stat(quarantined); code != ExitSpooled || err != nil || !strings.Contains(stderr, "refused a quarantined spool entry again") {
		t.Fatalf("retry with the cause still there: exit %d, entry %v; want 3 and the entry left in quarantine:\n%s", code, err, stderr)
	}

	f.exec(t, "DROP TABLE {db}.wallets")
	if code, _, stderr := f.run(t, "--flush-spool", "--retry-quarantined"); code != ExitOK {
		t.Fatalf("retry once the cause is gone: exit %d, want 0:\n%s", code, stderr)
	}
	if got := snapshots(); !slices.Equal(got, []uint64{1, 1, 1}) {
		t.Errorf("snapshots of the three entries %v, want each delivered", got)
	}
	if left := spoolEntries(t, filepath.Join(dir, "quarantine")); len(left) != 0 {
		t.Errorf("quarantine/ still holds %v", left)
	}
}
