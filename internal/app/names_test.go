package app

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// namesFixture serves projects a.dmail … f.dmail and keeps a table of
// tracked names in the test database, for schedules that read names from
// a file and a query.
func namesFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	var projects []apitest.Project
	for i, n := range []string{"a", "b", "c", "d", "e", "f"} {
		projects = append(projects, apitest.Project{ID: int64(i + 1), NFT: n + ".dmail",
			Messages: []apitest.Message{{ID: int64(10 * (i + 1)), ReadCount: 1, Total: 2, Percent: "50.00%"}}})
	}
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	table := f.DB.Table("tracked")
	f.exec(t, "CREATE DATABASE IF NOT EXISTS {db}")
	f.exec(t, "CREATE TABLE "+table+" (nft String, active UInt8) ENGINE = MergeTree ORDER BY nft")
	return f, table
}

// writeNamesSchedules writes a schedules file whose schedules are given
// as YAML, beside which names files live.
func (f *fixture) writeNamesSchedules(t *testing.T, doc string) string {
	t.Helper()
	apptest.WriteFile(t, f.Env["READSYNC_SCHEDULES_FILE"], doc)
	return filepath.Dir(f.Env["READSYNC_SCHEDULES_FILE"])
}

// namesAt returns the names of the projects written at the schedule's
// latest tick, none before the first.
func (f *fixture) namesAt(schedule string) (tick uint32, names []string) {
	ctx := context.Background()
	q := fmt.Sprintf("SELECT toUInt32(max(snapshot_at)) FROM %s WHERE schedule = '%s' AND trigger = 'cron'", f.DB.Table("sync_runs"), schedule)
	if err := f.DB.Conn.QueryRow(ctx, q).Scan(&tick); err != nil {
		return 0, nil // no pass yet
	}
	rows, err := f.DB.Conn.Query(ctx, fmt.Sprintf("SELECT DISTINCT nft FROM %s WHERE id IN "+
		"(SELECT project_id FROM %s WHERE toUInt32(snapshot_at) = %d) ORDER BY nft", f.DB.Table("projects"), f.DB.Table("message_read_snapshots"), tick))
	if err != nil {
		return 0, nil
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return 0, nil
		}
		names = append(names, n)
	}
	return tick, names
}

// A running daemon reads a schedule's file and query at every pass: a
// name added to either between two passes is fetched at the second, one
// removed is not. When the file disappears and the query fails, the
// passes run on the last list, saying so; every tick is recorded ok.
func TestDaemonResolvesNamesAtEveryPass(t *testing.T) {
	t.Parallel()
	f, table := namesFixture(t)
	dir := f.writeNamesSchedules(t, fmt.Sprintf(`schedules:
  - name: fast
    cron: "@every 2s"
    nft_names: [a.dmail]
    nft_names_file: names.txt
    nft_names_query: SELECT nft FROM %s WHERE active = 1
`, table))
	file := filepath.Join(dir, "names.txt")
	apptest.WriteFile(t, file, "# the growth team's\nb.dmail\n")
	f.exec(t, "INSERT INTO "+table+" (nft, active) SELECT 'c.dmail', 1")
	f.Env["READSYNC_LOG_LEVEL"] = "info"
	log, stop := f.startDaemon(t)

	waitFor := func(what string, want []string) uint32 {
		t.Helper()
		var tick uint32
		apptest.Eventually(t, what, func() bool {
			var got []string
			tick, got = f.namesAt("fast")
			return slices.Equal(got, want)
		}, log.String)
		return tick
	}
	first := waitFor("a pass of the three sources' names", []string{"a.dmail", "b.dmail", "c.dmail"})

	apptest.WriteFile(t, file, "d.dmail\n")
	f.exec(t, "INSERT INTO "+table+" (nft, active) SELECT 'e.dmail', 1")
	second := waitFor("a pass with the names added and without the one removed", []string{"a.dmail", "c.dmail", "d.dmail", "e.dmail"})

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	f.exec(t, "DROP TABLE "+table)
	apptest.Eventually(t, "a warning that the pass runs on the last list", func() bool {
		return strings.Count(log.String(), "names of a schedule not resolved; the pass runs on its last list") >= 2
	}, log.String)
	third := waitFor("a pass on the last list", []string{"a.dmail", "c.dmail", "d.dmail", "e.dmail"})
	if code := stop(); code != ExitOK {
		t.Fatalf("daemon exit %d; log:\n%s", code, log.String())
	}
	if first >= second || second >= third {
		t.Errorf("ticks %d, %d, %d: want three passes in order", first, second, third)
	}
	for _, want := range []string{`"source":"nft_names_file,nft_names_query"`, "names.txt", "tracked"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the warnings do not name %s; log:\n%s", want, log.String())
		}
	}
	// A tick skipped because the previous pass still ran (a loaded
	// machine, two seconds apart) says nothing of the names; a failed one
	// would.
	var notOK uint64
	f.Query(t, "SELECT count() FROM {db}.sync_runs WHERE schedule = 'fast' AND status NOT IN ('ok', 'skipped')", &notOK)
	if notOK != 0 {
		t.Errorf("%d ticks recorded other than ok or skipped", notOK)
	}
}

// A schedule whose names never resolved since the start records each
// tick failed with the reason, never as a pass of 0 names; a schedule
// whose source resolves to no names is said and recorded as passes of 0
// names; the other schedules go on.
func TestTicksWithoutNames(t *testing.T) {
	f, _ := namesFixture(t)
	dir := f.writeNamesSchedules(t, `schedules:
  - name: missing
    cron: "@every 2s"
    nft_names_file: missing.txt
  - name: empty
    cron: "@every 2s"
    nft_names_file: empty.txt
  - name: inline
    cron: "@every 2s"
    nft_names: [a.dmail]
`)
	apptest.WriteFile(t, filepath.Join(dir, "empty.txt"), "# nobody yet\n")
	f.Env["READSYNC_LOG_LEVEL"] = "info"
	log, stop := f.startDaemon(t)
	count := func(q string) uint64 {
		var n uint64
		_ = f.DB.Conn.QueryRow(context.Background(), strings.ReplaceAll(q, "{db}", "`"+f.DB.Name+"`")).Scan(&n)
		return n
	}
	apptest.Eventually(t, "two ticks of each schedule", func() bool {
		return count("SELECT min(c) FROM (SELECT count() AS c FROM {db}.sync_runs GROUP BY schedule HAVING schedule IN ('missing', 'empty', 'inline'))") >= 2 &&
			count("SELECT uniqExact(schedule) FROM {db}.sync_runs") == 3
	}, log.String)
	if code := stop(); code != ExitOK {
		t.Fatalf("daemon exit %d; log:\n%s", code, log.String())
	}
	var failed, otherwise uint64
	f.Query(t, "SELECT countIf(status = 'failed' AND nft_total = 0 AND position(error, 'names not resolved') > 0 AND position(error, 'missing.txt') > 0), "+
		"countIf(status != 'failed') FROM {db}.sync_runs WHERE schedule = 'missing'", &failed, &otherwise)
	if failed < 2 || otherwise != 0 {
		t.Errorf("schedule missing: %d ticks recorded failed with the reason, %d otherwise; want every tick failed, naming the file", failed, otherwise)
	}
	var zero, nonZero uint64
	f.Query(t, "SELECT countIf(status = 'ok' AND nft_total = 0), countIf(NOT (status = 'ok' AND nft_total = 0)) FROM {db}.sync_runs WHERE schedule = 'empty'", &zero, &nonZero)
	if zero < 2 || nonZero != 0 {
		t.Errorf("schedule empty: %d passes of 0 names, %d other records", zero, nonZero)
	}
	if !strings.Contains(log.String(), "a source of a schedule's names resolved to no names") {
		t.Errorf("no warning of a source that resolved to no names; log:\n%s", log.String())
	}
	var ok uint64
	f.Query(t, "SELECT countIf(status = 'ok' AND nft_ok = 1) FROM {db}.sync_runs WHERE schedule = 'inline'", &ok)
	if ok < 2 {
		t.Errorf("the inline schedule passed %d times beside the others, want every tick", ok)
	}
}

// Three pods share a schedule whose 10 000 names a query gives: at a
// tick, each name is fetched exactly once among them.
func TestPodsShareAQuerysNames(t *testing.T) {
	t.Parallel()
	projects := apitest.Generate(10_000, 1, 30)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	table := f.DB.Table("tracked")
	f.exec(t, "CREATE DATABASE IF NOT EXISTS {db}")
	f.exec(t, "CREATE TABLE "+table+" (nft String) ENGINE = MergeTree ORDER BY nft")
	batch, err := f.DB.Conn.PrepareBatch(context.Background(), "INSERT INTO "+table+" (nft)")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range apptest.NamesOf(projects) {
		if err := batch.Append(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	f.writeNamesSchedules(t, fmt.Sprintf("schedules:\n  - name: yearly\n    cron: \"0 0 1 1 *\"\n    nft_names_query: SELECT nft FROM %s\n", table))
	f.Env["READSYNC_CONCURRENCY"] = "32"

	fetched := map[string]int{}
	// A tick whose next, the pass's deadline, is months ahead: an hourly
	// tick's was seconds ahead when the test ran just before the hour,
	// and cut the pass off.
	tick := time.Date(time.Now().UTC().Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		f.Env["READSYNC_SHARD"] = fmt.Sprintf("%d/3", i)
		f.Env["READSYNC_SPOOL_DIR"] = filepath.Join(t.TempDir(), "spool")
		a := f.newTestApp(t, io.Discard)
		st := openTestStores(t, a)
		f.Srv.ResetRequests()
		a.cronPass(context.Background(), a.syncer(sink.NewJSONLines(io.Discard), nil), sync.NewResolver(st.ch), a.cfg.Schedules[0], tick)
		for _, r := range f.Srv.Requests() {
			if r.Path == apitest.DetailPath {
				fetched[r.Query.Get("nft_name")]++
			}
		}
	}
	for _, n := range apptest.NamesOf(projects) {
		if fetched[n] != 1 {
			t.Errorf("%s fetched %d times at the tick, want once", n, fetched[n])
		}
	}
	if extra := len(fetched) - len(projects); extra != 0 {
		t.Errorf("%d names fetched that the query did not give: %v", extra, slices.Collect(maps.Keys(fetched))[:min(5, len(fetched))])
	}
}

// --check prints each schedule's sources and the names each gave; a
// source that fails is a configuration error naming the schedule and the
// source.
func TestCheckNamesSources(t *testing.T) {
	f, table := namesFixture(t)
	f.exec(t, "INSERT INTO "+table+" (nft, active) SELECT 'c.dmail', 1")
	dir := f.writeNamesSchedules(t, fmt.Sprintf(`schedules:
  - name: hourly
    cron: "0 * * * *"
    nft_names: [a.dmail]
    nft_names_file: names.txt
    nft_names_query: SELECT nft FROM %s WHERE active = 1
`, table))
	apptest.WriteFile(t, filepath.Join(dir, "names.txt"), "a.dmail\nb.dmail\n")
	code, stdout, stderr := f.run(t, "--check")
	want := `names: ok (schedule "hourly": nft_names 1, nft_names_file 2, nft_names_query 1; 3 names)`
	if code != ExitOK || !strings.Contains(stdout, want) || !strings.Contains(stdout, "3 nft names") {
		t.Errorf("--check: exit %d, stdout\n%s\nwant a line %s\n%s", code, stdout, want, stderr)
	}
	f.exec(t, "DROP TABLE "+table)
	code, stdout, _ = f.run(t, "--check")
	if want := `config: FAILED: schedule "hourly": nft_names_query "SELECT nft FROM ` + table; code != ExitConfig || !strings.Contains(stdout, want) {
		t.Errorf("--check with the table gone: exit %d, stdout\n%s\nwant exit 2 and %s", code, stdout, want)
	}
}
