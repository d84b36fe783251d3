package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/internal/config"
	"github.com/readsync/readsync/sink/sinktest"
)

const (
	odd = "quote\" apostrophe' back\\slash\nnewline\x00nul 𝄞"
)

// fixture is apptest's, with the ways the binary's tests run readsync
// on it.
type fixture struct{ *apptest.Fixture }

func newFixture(t *testing.T, names []string, opts ...apitest.Option) *fixture {
	t.Helper()
	return &fixture{apptest.NewFixture(t, names, opts...)}
}

func (f *fixture) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, config.Environ(f.Env), &stdout, &stderr)
	f.NoSecrets(t, stdout.String()+stderr.String())
	return code, stdout.String(), stderr.String()
}

func goldenProjects() []apitest.Project {
	return []apitest.Project{
		{
			ID: 9007199254740993, NFT: "café-☕.eth", Name: odd, Description: "line1\nline2", Logo: "https://x/y.png?a=1&b=2",
			Type: 2, WalletAddress: "0xABCDEF", CreateAt: "2026-01-02 03:04:05",
			Extra: map[string]any{"tier": "gold", "nested": map[string]any{"a": []any{1, 2}}},
			Messages: []apitest.Message{
				{ID: 9007199254740995, Sender: "café-☕.eth", RecvGroup: "group\x00x", Receivers: []string{`a"b`, "c\nd"},
					Subject: "hi & <bye> " + odd, Type: 2, IsAllSubscribers: true, CreateAt: "2026-01-02 03:04:05",
					ReadCount: 5, Total: 10, Percent: "50.00%", Extra: map[string]any{"new_field": true}},
				{ID: 2, Sender: "café-☕.eth", CreateAt: "0000-00-00 00:00:00", ReadCount: 1, Total: 3, Percent: "n/a"},
				{ID: 3, Sender: "café-☕.eth", CreateAt: "yesterday", ReadCount: 0, Total: 0, Percent: ""},
			},
		},
		{ID: 2, NFT: "a&b=c+d%e f.eth", CreateAt: "2026-01-01 00:00:00", RawList: json.RawMessage("null")},
		{ID: 3, NFT: "empty.dmail", CreateAt: "2026-01-01 00:00:00"},
		{ID: 4, NFT: "shanghai.dmail", CreateAt: "2026-01-01 08:00:00",
			Messages: []apitest.Message{{ID: 40, CreateAt: "2026-01-01 08:30:00", ReadCount: 1, Total: 4, Percent: "25.00%"}}},
	}
}

func TestBackfillGolden(t *testing.T) {
	names := []string{"café-☕.eth", "a&b=c+d%e f.eth", "nobody.eth", "empty.dmail", "shanghai.dmail"}
	f := newFixture(t, names, apitest.WithProjects(goldenProjects()...))
	f.Env["READSYNC_SOURCE_TIMEZONE"] = "Asia/Shanghai"
	at := time.Date(2026, 2, 3, 4, 0, 0, 0, time.UTC)

	code, _, stderr := f.run(t, "--backfill", "--snapshot-at", at.Format(time.RFC3339))
	if code != ExitFailed {
		t.Fatalf("exit %d, want %d (one unknown name); stderr:\n%s", code, ExitFailed, stderr)
	}
	if !strings.Contains(stderr, `nobody.eth`) || !strings.Contains(stderr, "upstream reported failure") {
		t.Errorf("the failed name and its cause are not logged:\n%s", stderr)
	}
	for _, want := range []string{`"msg":"backfill summary","names_synced":4,"names_failed":1,"rows_written":`,
		`"msg":"backfill names failed","names":1,"nfts":["nobody.eth"],"err":"upstream reported failure for their project details; the nft name may not be registered: the API answers so for a name it does not know, and gives no other sign"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the summary lacks %s:\n%s", want, stderr)
		}
	}

	// The other names are all written.
	var projects uint64
	f.Query(t, "SELECT count() FROM {db}.projects FINAL", &projects)
	if projects != 4 {
		t.Errorf("%d projects, want 4", projects)
	}

	var (
		id                   int64
		nft, name, desc, raw string
		wallet, logo         string
		typ                  int64
		created              time.Time
	)
	f.Query(t, "SELECT id, nft, name, description, logo, type, wallet_address, create_at, raw FROM {db}.projects FINAL WHERE id = 9007199254740993",
		&id, &nft, &name, &desc, &logo, &typ, &wallet, &created, &raw)
	// 03:04:05 in Shanghai is 19:04:05 UTC the day before.
	if nft != "café-☕.eth" || name != odd || desc != "line1\nline2" || logo != "https://x/y.png?a=1&b=2" || typ != 2 || wallet != "0xABCDEF" ||
		!created.Equal(time.Date(2026, 1, 1, 19, 4, 5, 0, time.UTC)) {
		t.Errorf("project row: nft=%q name=%q desc=%q logo=%q type=%d wallet=%q create_at=%v", nft, name, desc, logo, typ, wallet, created.UTC())
	}
	var record map[string]any
	d := json.NewDecoder(strings.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&record); err != nil {
		t.Fatalf("raw is not JSON: %v", err)
	}
	if record["tier"] != "gold" || record["nested"] == nil || record["id"] != json.Number("9007199254740993") {
		t.Errorf("raw lost fields or the exact id: %s", raw)
	}

	var (
		subject, recvGroup string
		receivers          []string
		all                uint8
		msgCreated         time.Time
	)
	f.Query(t, "SELECT subject, recv_group, receivers, is_all_subscribers, create_at FROM {db}.messages FINAL WHERE id = 9007199254740995",
		&subject, &recvGroup, &receivers, &all, &msgCreated)
	if subject != "hi & <bye> "+odd || recvGroup != "group\x00x" || !slices.Equal(receivers, []string{`a"b`, "c\nd"}) || all != 1 {
		t.Errorf("message row: subject=%q recv_group=%q receivers=%q all=%d", subject, recvGroup, receivers, all)
	}

	// Unusable dates become the epoch; the rows are kept.
	var epochRows uint64
	f.Query(t, "SELECT count() FROM {db}.messages FINAL WHERE create_at = toDateTime(0) AND id IN (2, 3)", &epochRows)
	if epochRows != 2 {
		t.Errorf("%d messages with unusable dates stored at the epoch, want 2", epochRows)
	}
	if !strings.Contains(stderr, "create_at unusable") {
		t.Errorf("no warning for unusable dates:\n%s", stderr)
	}

	type snap struct {
		read, total uint64
		percent     float64
	}
	want := map[int64]snap{9007199254740995: {5, 10, 50}, 2: {1, 3, 33.33}, 3: {0, 0, 0}, 40: {1, 4, 25}}
	rows, err := f.DB.Conn.Query(context.Background(), "SELECT message_id, snapshot_at, read_count, total, percent FROM "+f.DB.Table("message_read_snapshots")+" FINAL")
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]snap{}
	for rows.Next() {
		var (
			mid    int64
			snapAt time.Time
			s      snap
		)
		if err := rows.Scan(&mid, &snapAt, &s.read, &s.total, &s.percent); err != nil {
			t.Fatal(err)
		}
		if !snapAt.Equal(at) {
			t.Errorf("message %d snapshot_at %v, want %v", mid, snapAt.UTC(), at)
		}
		got[mid] = s
	}
	rows.Close()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("snapshots\n got %v\nwant %v", got, want)
	}
	if !strings.Contains(stderr, "percent unparseable") {
		t.Errorf("no warning for the unparseable percent:\n%s", stderr)
	}

	var (
		status, errText        string
		total, ok, failed, msg uint64
		runAt                  time.Time
	)
	f.Query(t, "SELECT status, error, nft_total, nft_ok, nft_failed, messages, snapshot_at FROM {db}.sync_runs", &status, &errText, &total, &ok, &failed, &msg, &runAt)
	if status != "partial" || total != 5 || ok != 4 || failed != 1 || msg != 4 || !runAt.Equal(at) || !strings.Contains(errText, `nft "nobody.eth"`) {
		t.Errorf("sync_runs: status=%s total=%d ok=%d failed=%d messages=%d snapshot_at=%v error=%q", status, total, ok, failed, msg, runAt, errText)
	}
}

// Re-running a pass for one snapshot_at replaces its rows, even within one
// second: FINAL shows one row a key with the later values.
func TestBackfillUpsertsOneSnapshot(t *testing.T) {
	p := apitest.Project{ID: 10, NFT: "up.eth", CreateAt: "2026-01-01 00:00:00",
		Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 10, Percent: "10.00%"}, {ID: 2, ReadCount: 0, Total: 5, Percent: "0.00%"}}}
	f := newFixture(t, []string{"up.eth"}, apitest.WithProjects(p))
	args := []string{"--backfill", "--snapshot-at", "2026-03-01T12:00:00Z"}
	if code, _, stderr := f.run(t, args...); code != ExitOK {
		t.Fatalf("first pass exit %d:\n%s", code, stderr)
	}
	p.Messages[0].ReadCount, p.Messages[0].Percent = 7, "70.00%"
	p.Name = "renamed"
	f.Srv.SetProject(p)
	if code, _, stderr := f.run(t, args...); code != ExitOK {
		t.Fatalf("second pass exit %d:\n%s", code, stderr)
	}
	if n := f.DB.Count(t, "message_read_snapshots"); n != 2 {
		t.Errorf("FINAL shows %d snapshot rows, want 2 (one per message)", n)
	}
	var read uint64
	var percent float64
	f.Query(t, "SELECT read_count, percent FROM {db}.message_read_snapshots FINAL WHERE message_id = 1", &read, &percent)
	if read != 7 || percent != 70 {
		t.Errorf("message 1 shows %d reads, %v%%; want the second pass's 7, 70%%", read, percent)
	}
	var name string
	f.Query(t, "SELECT name FROM {db}.projects FINAL", &name)
	if name != "renamed" {
		t.Errorf("project name %q, want the later pass's", name)
	}
	var runs uint64
	f.Query(t, "SELECT count() FROM {db}.sync_runs", &runs)
	if runs != 2 {
		t.Errorf("%d runs recorded, want 2", runs)
	}
}

// Rows of all names share INSERTs: one per table for a pass that fits one
// batch, and more, smaller ones when READSYNC_BATCH_ROWS says so (a batch
// goes to a writer with nothing to do once it holds two thirds of them,
// so a batch but the last holds 66 to 110 rows here). Each
// INSERT into a table takes the next block number, which the names of its
// parts keep after any merge (current releases merge at once, and drop
// the merged parts), so the span of block numbers counts the INSERTs
// without interference from other tests on the same server. Every row of
// a table here falls in one partition.
func TestBackfillBatchesInserts(t *testing.T) {
	projects := apitest.Generate(40, 5, 7)
	names := apptest.NamesOf(projects)
	parts := func(f *fixture, table string) uint64 {
		var n uint64
		f.Query(t, fmt.Sprintf("SELECT toUInt64(max(max_block_number) - min(min_block_number) + 1) FROM system.parts WHERE active AND database = '%s' AND table = '%s'", f.DB.Name, table), &n)
		return n
	}
	t.Run("one batch", func(t *testing.T) {
		f := newFixture(t, names, apitest.WithProjects(projects...))
		if code, _, stderr := f.run(t, "--backfill"); code != ExitOK {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		for _, table := range []string{"projects", "messages", "message_read_snapshots", "sync_runs"} {
			if n := parts(f, table); n != 1 {
				t.Errorf("%s: %d INSERTs, want 1", table, n)
			}
		}
		if n := f.DB.Count(t, "message_read_snapshots"); n != 200 {
			t.Errorf("%d snapshots, want 200", n)
		}
	})
	t.Run("small batches", func(t *testing.T) {
		f := newFixture(t, names, apitest.WithProjects(projects...))
		f.Env["READSYNC_BATCH_ROWS"] = "100" // a name is 11 rows: a batch holds 10 names
		if code, _, stderr := f.run(t, "--backfill"); code != ExitOK {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		// 440 rows: 4 batches of ten names, up to 7 when every batch
		// but the last is taken at six.
		if n := parts(f, "message_read_snapshots"); n < 4 || n > 7 {
			t.Errorf("%d snapshot INSERTs, want 4 to 7", n)
		}
		if n := f.DB.Count(t, "message_read_snapshots"); n != 200 {
			t.Errorf("%d snapshots, want 200", n)
		}
	})
}

func TestBackfillChoosesNames(t *testing.T) {
	projects := apitest.Generate(3, 1, 1)
	f := newFixture(t, []string{projects[0].NFT, projects[1].NFT}, apitest.WithProjects(projects...))
	if code, _, stderr := f.run(t, "--backfill", "--nft", projects[2].NFT); code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if reqs := f.Srv.Requests(); len(reqs) != 2 || reqs[0].Query.Get("nft_name") != projects[2].NFT {
		t.Errorf("--nft fetched %d requests, want exactly the one name's two", len(reqs))
	}
	f.Srv.ResetRequests()
	if code, _, stderr := f.run(t, "--backfill", "--schedule", "hourly"); code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if n := f.Srv.RequestCount(apitest.DetailPath); n != 2 {
		t.Errorf("--schedule fetched %d names, want 2", n)
	}
	// Both runs can start within the same second, so the runs are told
	// apart by what they recorded rather than by their order in time.
	var runs []string
	f.Query(t, "SELECT arraySort(groupArray(concat(schedule, '/', toString(nft_total)))) FROM {db}.sync_runs", &runs)
	if want := []string{"/1", "hourly/2"}; !slices.Equal(runs, want) {
		t.Errorf("sync_runs (schedule/nft_total) %q, want %q", runs, want)
	}
}

func TestDryRunPrintsRowsWithoutClickHouse(t *testing.T) {
	f := newFixture(t, []string{"café-☕.eth"}, apitest.WithProjects(goldenProjects()[0]))
	delete(f.Env, "READSYNC_CLICKHOUSE_DSN")
	code, stdout, stderr := f.run(t, "--backfill", "--dry-run", "--snapshot-at", "2026-01-01T00:00:00Z")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var v struct {
			Table string `json:"table"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		counts[v.Table]++
	}
	want := map[string]int{"projects": 1, "messages": 3, "message_read_snapshots": 3, "sync_runs": 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("dry run printed %v, want %v", counts, want)
	}
	if !strings.Contains(stdout, `"id":9007199254740993`) {
		t.Errorf("dry run lost the exact id")
	}
}

func TestCheck(t *testing.T) {
	f := newFixture(t, []string{"p.eth"}, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth"}))
	code, stdout, stderr := f.run(t, "--check")
	if code != ExitOK || !strings.Contains(stdout, "api: ok") || !strings.Contains(stdout, "clickhouse: ok (server ") {
		t.Fatalf("--check exit %d:\n%s%s", code, stdout, stderr)
	}
	f.Env["READSYNC_CLIENT_SECRET"] = "not-the-secret-either"
	f.Env["READSYNC_CLICKHOUSE_DSN"] = "clickhouse://default:db-pa55word@127.0.0.1:1/x?dial_timeout=1s"
	code, stdout, stderr = f.run(t, "--check")
	if code != ExitFailed || !strings.Contains(stdout, "api: FAILED: project details of nft \"p.eth\": HTTP 401") || !strings.Contains(stdout, "clickhouse: FAILED") {
		t.Fatalf("--check with bad credentials: exit %d:\n%s%s", code, stdout, stderr)
	}
	for _, s := range []string{"not-the-secret-either", "db-pa55word"} {
		if strings.Contains(stdout+stderr, s) {
			t.Errorf("--check output leaks %q:\n%s%s", s, stdout, stderr)
		}
	}
}

// --check prints exactly one line per check on stdout: retries are counted
// on the API's line, not logged, and refused credentials name the
// variables to check.
func TestCheckPrintsOneLinePerCheck(t *testing.T) {
	f := newFixture(t, []string{"p.eth"}, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth"}),
		apitest.WithFault("p.eth", apitest.FailFirst(2, apitest.StatusFault(503, "busy"))))
	varying := regexp.MustCompile(`\d+(\.\d+)?(µs|ms|s)\b|server [0-9.]+`)
	normalize := func(s string) string {
		return varying.ReplaceAllStringFunc(s, func(m string) string {
			if strings.HasPrefix(m, "server") {
				return "server V"
			}
			return "D"
		})
	}
	_, pending := migrationsFor(t, f)
	code, stdout, stderr := f.run(t, "--check")
	want := fmt.Sprintf(`config: ok (%[1]s: 1 schedules, 1 nft names)
spool: ok (%[2]s: to be created at start)
api: ok (%[3]s: nft "p.eth" is project 1, D after 2 retries)
clickhouse: ok (server V, database %[4]q, schema version 0, pending: %[5]s; this server takes them (tried in a scratch database); readsync --migrate or the daemon applies them)
`, f.Env["READSYNC_SCHEDULES_FILE"], f.Env["READSYNC_SPOOL_DIR"], f.Srv.URL, f.DB.Name, pending)
	if code != ExitOK || normalize(stdout) != want {
		t.Errorf("--check exit %d, stdout\n%s\nwant (durations as D)\n%s", code, stdout, want)
	}
	if strings.Contains(stderr, "retrying") {
		t.Errorf("--check logged its retries:\n%s", stderr)
	}

	f.Env["READSYNC_CLIENT_SECRET"] = "not-the-secret"
	code, stdout, _ = f.run(t, "--check", "--dry-run")
	want = fmt.Sprintf(`config: ok (%s: 1 schedules, 1 nft names)
api: FAILED: project details of nft "p.eth": HTTP 401 Unauthorized: {"code":0,"data":{},"msg":"Process failed","success":false}; check READSYNC_CLIENT_ID and READSYNC_CLIENT_SECRET
clickhouse: skipped (--dry-run)
`, f.Env["READSYNC_SCHEDULES_FILE"])
	if code != ExitFailed || stdout != want {
		t.Errorf("--check with a wrong secret: exit %d, stdout\n%s\nwant\n%s", code, stdout, want)
	}
}

// The daemon runs schedules on their cron, stamps each pass with its tick
// and stops cleanly on cancellation.
func TestDaemonRunsSchedules(t *testing.T) {
	f := newFixture(t, []string{"p.eth"}, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth",
		Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 2, Percent: "50.00%"}}}))
	doc := "schedules:\n  - name: fast\n    cron: \"@every 1s\"\n    nft_names: [p.eth]\n"
	if err := os.WriteFile(f.Env["READSYNC_SCHEDULES_FILE"], []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, nil, config.Environ(f.Env), &bytes.Buffer{}, &stderr) }()

	deadline := time.Now().Add(30 * time.Second)
	var runs uint64
	for runs < 2 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		_ = f.DB.Conn.QueryRow(context.Background(),
			"SELECT count() FROM "+f.DB.Table("sync_runs")+" WHERE trigger = 'cron' AND schedule = 'fast' AND status = 'ok'").Scan(&runs)
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("daemon exit %d", code)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("daemon did not stop after cancellation")
	}
	if runs < 2 {
		t.Fatalf("%d cron passes recorded; log:\n%s", runs, stderr.String())
	}
	// Each pass's snapshots carry its run's tick. (A tick skipped while
	// the previous pass ran, on a loaded machine a second apart, and the
	// pass the cancellation cut short wrote none.)
	var mismatched uint64
	f.Query(t, "SELECT count() FROM {db}.sync_runs WHERE status = 'ok' AND snapshot_at NOT IN (SELECT snapshot_at FROM {db}.message_read_snapshots)", &mismatched)
	if mismatched != 0 {
		t.Errorf("%d runs whose tick has no snapshot rows: %v", mismatched, sinktest.Lines(t, f.DB.Conn,
			"SELECT concat(status, ' ', toString(snapshot_at), ' ', error) FROM "+f.DB.Table("sync_runs")+" ORDER BY snapshot_at"))
	}
}

// A backfill writes over native TLS to a server whose certificate a private
// CA signed, given that CA in READSYNC_CLICKHOUSE_CA_FILE; without it,
// --check names the certificate problem.
func TestBackfillOverTLS(t *testing.T) {
	f := newFixture(t, []string{"tls.eth"}, apitest.WithProjects(apitest.Project{ID: 5, NFT: "tls.eth",
		Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 2, Percent: "50.00%"}}}))
	srv := sinktest.NewTLSServer(t)
	f.Env["READSYNC_CLICKHOUSE_DSN"] = srv.DSN
	f.Env["READSYNC_CLICKHOUSE_CA_FILE"] = srv.CAFile
	if code, _, stderr := f.run(t, "--backfill"); code != ExitOK {
		t.Fatalf("backfill over TLS: exit %d:\n%s", code, stderr)
	}
	var n uint64
	if err := srv.Conn.QueryRow(context.Background(), "SELECT count() FROM `readsync`.`message_read_snapshots` FINAL").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d snapshot rows over TLS, want 1", n)
	}

	delete(f.Env, "READSYNC_CLICKHOUSE_CA_FILE")
	code, stdout, stderr := f.run(t, "--check")
	if code != ExitFailed || !strings.Contains(stdout, "clickhouse: FAILED") || !strings.Contains(stdout, "certificate signed by unknown authority") {
		t.Fatalf("--check without the CA: exit %d:\n%s%s", code, stdout, stderr)
	}
}
