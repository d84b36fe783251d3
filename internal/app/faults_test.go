package app

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/internal/config"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sync"
)

// startDaemon runs the daemon until the returned stop is called; stop
// returns its exit code.
func (f *fixture) startDaemon(t *testing.T) (log *apptest.LockedBuffer, stop func() int) {
	t.Helper()
	log, signal, wait := f.startDaemonSignalled(t)
	return log, func() int {
		t.Helper()
		signal()
		return wait()
	}
}

// startDaemonSignalled runs the daemon; signal does what SIGTERM does to the
// process and returns at once, and wait waits for the exit code. Both may be
// called more than once; the end of the test does both.
func (f *fixture) startDaemonSignalled(t *testing.T) (log *apptest.LockedBuffer, signal func(), wait func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log = &apptest.LockedBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, nil, config.Environ(f.Env), log, log) }()
	stopped := false
	var code int
	wait = func() int {
		t.Helper()
		if stopped {
			return code
		}
		stopped = true
		select {
		case code = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("daemon did not stop within a minute; log:\n%s", log.String())
		}
		f.NoSecrets(t, log.String())
		return code
	}
	t.Cleanup(func() {
		cancel()
		wait()
	})
	return log, cancel, wait
}

func snapshotsOf(projects []apitest.Project) uint64 {
	n := 0
	for _, p := range projects {
		n += len(p.Messages)
	}
	return uint64(n)
}

// exactlyOnce checks that the snapshot table holds want rows and that no
// key is there twice, even before deduplication.
func (f *fixture) exactlyOnce(t *testing.T, want uint64) {
	t.Helper()
	var rows, keys uint64
	f.Query(t, "SELECT count(), uniqExact(project_id, message_id, snapshot_at) FROM {db}.message_read_snapshots", &rows, &keys)
	if rows != want || keys != want {
		t.Errorf("%d snapshot rows with %d distinct keys, want %d of each", rows, keys, want)
	}
}

func spoolEntries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".json.gz") {
			names = append(names, de.Name())
		}
	}
	return names
}

// Every fault the upstream can throw, once or a few times, costs retries
// and never a snapshot: everything is written exactly once and the
// backfill exits 0.
func TestBackfillRidesOutUpstreamFaults(t *testing.T) {
	projects := apitest.Generate(12, 4, 11)
	faults := []struct {
		fault apitest.Fault
		times int
	}{
		{apitest.StatusFault(502, "<html><body><h1>502 Bad Gateway</h1></body></html>"), 2},
		{apitest.StatusFault(503, "<html>maintenance</html>"), 3},
		{apitest.RateLimited("1"), 1},
		{apitest.ConnReset(), 3},
		{apitest.Truncated(25), 2},
		{apitest.InvalidJSON(), 2},
		{apitest.Slow(5 * time.Second), 1},
		{apitest.FailureEnvelope(), 1}, // retried once only
		{apitest.Truncated(0), 4},      // the last retry of four succeeds
	}
	var opts []apitest.Option
	retries := 0
	for i, ft := range faults {
		// Half the faults hit the details request, half the list, each
		// on its own name.
		if i%2 == 0 {
			opts = append(opts, apitest.WithFault(projects[i].NFT, apitest.FailFirst(ft.times, ft.fault)))
		} else {
			opts = append(opts, apitest.WithListFault(projects[i].ID, apitest.FailFirst(ft.times, ft.fault)))
		}
		retries += ft.times
	}
	f := newFixture(t, apptest.NamesOf(projects), append(opts, apitest.WithProjects(projects...))...)
	f.Env["READSYNC_REQUEST_TIMEOUT"] = "1s"
	f.Env["READSYNC_MAX_RETRIES"] = "4"

	code, _, stderr := f.run(t, "--backfill")
	if code != ExitOK {
		t.Fatalf("exit %d, want 0; log:\n%s", code, stderr)
	}
	f.exactlyOnce(t, snapshotsOf(projects))
	// net/http itself retries a GET whose reused connection was reset, so
	// a few resets may never reach readsync's retry log.
	if n := strings.Count(stderr, "upstream request failed, retrying"); n < retries-3 || n > retries {
		t.Errorf("%d retries logged, want %d (or up to 3 fewer)", n, retries)
	}
	if entries := spoolEntries(t, f.Env["READSYNC_SPOOL_DIR"]); len(entries) != 0 {
		t.Errorf("spool holds %v after a clean write", entries)
	}
}

// Faults that do not pass fail their own name only, with a message that
// says why, and the backfill exits 1.
func TestBackfillFailsOnlyTheBrokenNames(t *testing.T) {
	projects := apitest.Generate(4, 3, 5)
	big := apitest.Project{ID: 99, NFT: "big.eth", CreateAt: "2026-01-01 00:00:00"}
	for i := range 400 {
		big.Messages = append(big.Messages, apitest.Message{ID: int64(i + 1), ReadCount: 1, Total: 2, Percent: "50.00%"})
	}
	f := newFixture(t, append(apptest.NamesOf(projects), big.NFT),
		apitest.WithProjects(append(projects, big)...),
		apitest.WithFault(projects[0].NFT, apitest.StatusFault(500, "<html>always down</html>")),
		apitest.WithListFault(projects[1].ID, apitest.StatusFault(403, `{"error":"forbidden"}`)))
	f.Env["READSYNC_MAX_RESPONSE_BYTES"] = "16KiB"
	f.Env["READSYNC_MAX_RETRIES"] = "2"

	code, _, stderr := f.run(t, "--backfill")
	if code != ExitFailed {
		t.Fatalf("exit %d, want 1; log:\n%s", code, stderr)
	}
	for _, want := range []string{
		"after 3 attempts: HTTP 500 Internal Server Error",
		"HTTP 403 Forbidden",
		"response body exceeds the size limit of 16384 bytes",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("log does not say %q", want)
		}
	}
	f.exactlyOnce(t, snapshotsOf(projects[2:]))
	if n := f.Srv.RequestCount(apitest.DetailPath); n != 3+4 {
		t.Errorf("%d detail requests, want 3 for the failing name and 1 for each other", n)
	}
	var status string
	var failed uint64
	f.Query(t, "SELECT status, nft_failed FROM {db}.sync_runs", &status, &failed)
	if status != "partial" || failed != 3 {
		t.Errorf("run recorded as %s with %d failed names, want partial with 3", status, failed)
	}
}

// With ClickHouse unreachable, a backfill still fetches everything, spools
// it and exits 3; the next backfill, with ClickHouse back, delivers the
// spool first: every snapshot arrives, none twice.
func TestBackfillSpoolsThroughAnOutage(t *testing.T) {
	projects := apitest.Generate(6, 5, 3)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	proxy := f.DB.NewProxy(t)
	f.Env["READSYNC_CLICKHOUSE_DSN"] = proxy.DSN
	f.Env["READSYNC_BATCH_ROWS"] = "20" // several entries
	spoolDir := f.Env["READSYNC_SPOOL_DIR"]

	proxy.Down()
	code, _, stderr := f.run(t, "--backfill", "--snapshot-at", "2026-05-01T10:00:00Z")
	if code != ExitSpooled {
		t.Fatalf("exit %d during the outage, want 3; log:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "rows spooled") {
		t.Errorf("log does not say rows were spooled")
	}
	entries := spoolEntries(t, spoolDir)
	if len(entries) < 3 {
		t.Fatalf("spool holds %v, want several row entries and the run record", entries)
	}

	proxy.Up()
	// Only one name this time: the other names' rows come from the spool.
	code, _, stderr = f.run(t, "--backfill", "--snapshot-at", "2026-05-01T11:00:00Z", "--nft", projects[0].NFT)
	if code != ExitOK {
		t.Fatalf("exit %d after the outage, want 0; log:\n%s", code, stderr)
	}
	if left := spoolEntries(t, spoolDir); len(left) != 0 {
		t.Errorf("spool still holds %v", left)
	}
	f.exactlyOnce(t, snapshotsOf(projects)+uint64(len(projects[0].Messages)))
	var runs uint64
	f.Query(t, "SELECT count() FROM {db}.sync_runs", &runs)
	if runs != 2 {
		t.Errorf("%d run records, want the spooled one and the new one", runs)
	}
}

// The daemon outlives an outage that starts mid-run: passes spool, the
// background flusher delivers once ClickHouse is back, and SIGTERM still
// exits 0.
func TestDaemonSpoolsAndFlushesAcrossAnOutage(t *testing.T) {
	projects := apitest.Generate(5, 4, 9)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	proxy := f.DB.NewProxy(t)
	f.Env["READSYNC_CLICKHOUSE_DSN"] = proxy.DSN
	f.Env["READSYNC_SPOOL_FLUSH_INTERVAL"] = "200ms"
	f.WriteSchedules(t, "fast", "@every 1s", apptest.NamesOf(projects))
	spoolDir := f.Env["READSYNC_SPOOL_DIR"]

	log, stop := f.startDaemon(t)
	okRuns := func() uint64 {
		var n uint64
		_ = f.DB.Conn.QueryRow(context.Background(), "SELECT count() FROM "+f.DB.Table("sync_runs")).Scan(&n)
		return n
	}
	apptest.Eventually(t, "a first pass written", func() bool { return okRuns() >= 1 }, log.String)

	proxy.Down()
	apptest.Eventually(t, "a pass spooled", func() bool { return len(spoolEntries(t, spoolDir)) >= 2 }, log.String)
	proxy.Up()
	apptest.Eventually(t, "the spool flushed", func() bool { return len(spoolEntries(t, spoolDir)) == 0 }, log.String)
	if code := stop(); code != ExitOK {
		t.Fatalf("daemon exit %d; log:\n%s", code, log.String())
	}
	// Whatever the last pass left in the spool is delivered by the next
	// process; here, by a backfill that only flushes.
	if code, _, stderr := f.run(t, "--backfill", "--nft", projects[0].NFT); code != ExitOK {
		t.Fatalf("backfill after the daemon: exit %d; log:\n%s", code, stderr)
	}

	// Every pass recorded a run; each run's snapshots are all there.
	var runs, missing uint64
	f.Query(t, "SELECT count() FROM {db}.sync_runs", &runs)
	f.Query(t, `SELECT count() FROM (
		SELECT snapshot_at, count() AS n FROM {db}.message_read_snapshots FINAL GROUP BY snapshot_at
	) WHERE n != `+itoa(snapshotsOf(projects)), &missing)
	if runs < 3 || missing > 1 { // the final backfill covers one name only
		t.Errorf("%d runs, %d snapshot times with rows missing", runs, missing)
	}
	if !strings.Contains(log.String(), "spool flushed") {
		t.Errorf("the daemon never logged a flush")
	}
}

// SIGTERM lets a running pass go on for the grace period, then spools what
// was fetched and exits 0; nothing fetched is lost.
func TestShutdownSpoolsWhatWasFetched(t *testing.T) {
	projects := apitest.Generate(3, 2, 4)
	stuck := projects[2].NFT
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...),
		apitest.WithFault(stuck, apitest.Slow(10*time.Minute)))
	f.Env["READSYNC_SHUTDOWN_GRACE"] = "300ms"
	f.Env["READSYNC_REQUEST_TIMEOUT"] = "10m"
	f.WriteSchedules(t, "fast", "@every 1s", apptest.NamesOf(projects))
	spoolDir := f.Env["READSYNC_SPOOL_DIR"]

	log, stop := f.startDaemon(t)
	apptest.Eventually(t, "the stuck name requested", func() bool { return f.Srv.RequestCount(apitest.ListPath) >= 2 }, log.String)
	if code := stop(); code != ExitOK {
		t.Fatalf("exit %d; log:\n%s", code, log.String())
	}
	if len(spoolEntries(t, spoolDir)) < 2 {
		t.Fatalf("spool holds %v, want the fetched rows and the run record; log:\n%s", spoolEntries(t, spoolDir), log.String())
	}
	delete(f.Env, "READSYNC_SHUTDOWN_GRACE")
	f.Srv.SetFault(stuck, apitest.Fault{})
	if code, _, stderr := f.run(t, "--backfill", "--nft", stuck); code != ExitOK {
		t.Fatalf("backfill: exit %d; log:\n%s", code, stderr)
	}
	var fetched, status string
	f.Query(t, "SELECT toString(count()) FROM {db}.message_read_snapshots FINAL WHERE project_id IN ("+
		itoa(uint64(projects[0].ID))+", "+itoa(uint64(projects[1].ID))+")", &fetched)
	if fetched != "4" {
		t.Errorf("%s snapshots of the fetched names arrived, want 4", fetched)
	}
	f.Query(t, "SELECT status FROM {db}.sync_runs WHERE trigger = 'cron'", &status)
	if status != "partial" {
		t.Errorf("the interrupted pass was recorded as %q, want partial", status)
	}
}

// No secret reaches anything readsync prints or writes, at debug level,
// under upstream faults and with the database refusing the password.
func TestSecretsNeverLeak(t *testing.T) {
	sinktest.Require(t, sinktest.SurvivesFailedLogin)
	const dbPassword = "db-pa55-0f-the-test"
	projects := apitest.Generate(3, 2, 8)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...),
		apitest.WithFault(projects[0].NFT, apitest.FailFirst(1, apitest.StatusFault(500, "<html>oops</html>"))),
		apitest.WithListFault(projects[1].ID, apitest.FailFirst(1, apitest.Truncated(10))))
	f.Secrets = append(f.Secrets, dbPassword)
	// The server's default user has no password, so it refuses this one:
	// every write fails and the error paths run.
	f.Env["READSYNC_CLICKHOUSE_DSN"] = strings.Replace(f.DB.DSN, "default:@", "default:"+dbPassword+"@", 1)
	if !strings.Contains(f.Env["READSYNC_CLICKHOUSE_DSN"], dbPassword) {
		f.Env["READSYNC_CLICKHOUSE_DSN"] = strings.Replace(f.DB.DSN, "://", "://default:"+dbPassword+"@", 1)
	}

	if code, _, stderr := f.run(t, "--backfill"); code != ExitSpooled {
		t.Errorf("backfill exit %d, want 3; log:\n%s", code, stderr)
	}
	f.run(t, "--check")
	f.Env["READSYNC_CLICKHOUSE_DSN"] = "clickhouse://default:" + dbPassword + "@127.0.0.1:1/x?dial_timeout=bogus"
	f.run(t, "--check")
	f.Env["READSYNC_CLICKHOUSE_DSN"] = "http://default:" + dbPassword + "@127.0.0.1:1/x"
	f.run(t, "--backfill")

	dir := f.Env["READSYNC_SPOOL_DIR"]
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f.NoSecrets(t, path)
		if !d.IsDir() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
				if b, err = io.ReadAll(zr); err != nil {
					return err
				}
			}
			f.NoSecrets(t, string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// An upstream that refuses connections costs a backfill of thousands of
// names its first wave of requests: it logs the outage once, records every
// name as failed, and the next backfill, with the upstream back, writes
// every name.
func TestBackfillThroughAnUpstreamOutage(t *testing.T) {
	t.Parallel()
	const names = 5000
	projects := apitest.Generate(names, 1, 41)
	f := newFixture(t, apptest.NamesOf(projects))
	// The upstream is down on a port nothing listens on, and comes back there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	f.Env["READSYNC_API_BASE_URL"] = "http://" + addr

	code, _, stderr := f.run(t, "--backfill")
	if code != ExitFailed {
		t.Fatalf("exit %d during the outage, want 1; log:\n%s", code, stderr)
	}
	// The first wave: the names in flight and those that tripped the
	// breaker, each with its retries; not one line per name.
	const concurrency, retries = 8, 4
	firstWave := concurrency + sync.BreakerThreshold
	for _, c := range []struct {
		line     string
		min, max int
	}{
		{`"msg":"upstream unavailable: the pass stopped asking for names"`, 1, 1},
		{`"msg":"upstream request failed, retrying"`, 1, firstWave * retries},
		{`"msg":"name failed"`, sync.BreakerThreshold, firstWave},
		{`"msg":"backfill names failed"`, 1, 1},
	} {
		if n := strings.Count(stderr, c.line); n < c.min || n > c.max {
			t.Errorf("%d lines %s, want %d to %d", n, c.line, c.min, c.max)
		}
	}
	var status, errText string
	var failed uint64
	f.Query(t, "SELECT status, nft_failed, error FROM {db}.sync_runs", &status, &failed, &errText)
	if status != "failed" || failed != names || !strings.Contains(errText, " more: upstream unavailable: 5 names in a row failed with no answer from it") ||
		!strings.Contains(errText, "connection refused") {
		t.Errorf("sync_runs: status %s, %d failed, error %q", status, failed, errText)
	}

	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	srv := apitest.NewServer(apitest.WithListener(l), apitest.WithCredentials("1001", apptest.Secret), apitest.WithProjects(projects...))
	t.Cleanup(srv.Close)
	if code, _, stderr := f.run(t, "--backfill"); code != ExitOK {
		t.Fatalf("exit %d with the upstream back; log:\n%.4000s", code, stderr)
	}
	f.exactlyOnce(t, names)
}

// Two replicas with READSYNC_SHARD 0/2 and 1/2 together fetch every name
// exactly once, and neither fetches them all.
func TestShardsSplitTheNames(t *testing.T) {
	projects := apitest.Generate(40, 2, 6)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	perShard := map[string]int{}
	for _, shard := range []string{"0/2", "1/2"} {
		f.Env["READSYNC_SHARD"] = shard
		f.Srv.ResetRequests()
		if code, _, stderr := f.run(t, "--backfill"); code != ExitOK {
			t.Fatalf("shard %s: exit %d; log:\n%s", shard, code, stderr)
		}
		for _, r := range f.Srv.Requests() {
			if n := r.Query.Get("nft_name"); n != "" {
				perShard[n]++
			}
		}
		if n := f.Srv.RequestCount(apitest.DetailPath); n == 0 || n == len(projects) {
			t.Errorf("shard %s fetched %d of %d names", shard, n, len(projects))
		}
	}
	for _, name := range apptest.NamesOf(projects) {
		if perShard[name] != 1 {
			t.Errorf("%q fetched %d times across the shards", name, perShard[name])
		}
	}
	f.exactlyOnce(t, snapshotsOf(projects))
}
