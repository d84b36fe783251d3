// Package apptest is what a test of readsync as a whole needs: a fake
// upstream and a fresh ClickHouse database with the environment that points
// readsync at both, and the waits on a running daemon's log and listener.
// The binary's own tests and those of its deployments share it; running
// readsync is theirs to do, with app.Run or as a process.
package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/sink/sinktest"
)

// Secret is the fixture's API client secret, which nothing readsync
// prints may contain.
const Secret = "e2e-client-secret-value"

// Fixture is a fake upstream, a fresh ClickHouse database and an
// environment pointing readsync at both.
type Fixture struct {
	Srv *apitest.Server
	DB  *sinktest.DB
	Env map[string]string
	// Secrets must never appear in anything readsync prints.
	Secrets []string
}

// NewFixture serves the upstream with opts and writes a schedules file of
// one hourly schedule of names.
func NewFixture(t *testing.T, names []string, opts ...apitest.Option) *Fixture {
	t.Helper()
	srv := apitest.NewServer(append([]apitest.Option{apitest.WithCredentials("1001", Secret)}, opts...)...)
	t.Cleanup(srv.Close)
	db := sinktest.New(t)
	// readsync drops a connection whose statement it no longer waits for
	// (a pass cut off by its deadline or the next tick), which a server
	// survives but chDB's build of the current release does not: there
	// readsync reaches the server through a proxy that never passes the
	// reset on. A test that needs the server itself sets the DSN again.
	dsn := db.DSN
	if sinktest.Lacks(sinktest.SurvivesKilledClient) {
		dsn = db.NewProxy(t).DSN
	}
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	WriteSchedules(t, schedules, "hourly", "0 * * * *", names)
	return &Fixture{Srv: srv, DB: db, Secrets: []string{Secret}, Env: map[string]string{
		"READSYNC_API_BASE_URL":   srv.URL,
		"READSYNC_CLIENT_ID":      "1001",
		"READSYNC_CLIENT_SECRET":  Secret,
		"READSYNC_CLICKHOUSE_DSN": dsn,
		"READSYNC_SCHEDULES_FILE": schedules,
		"READSYNC_LOG_LEVEL":      "debug",
		"READSYNC_SPOOL_DIR":      filepath.Join(t.TempDir(), "spool"),
		// Fast retries and no rate limit keep the tests quick; both are
		// exercised on their own.
		"READSYNC_RETRY_BACKOFF": "1ms",
		"READSYNC_RATE_LIMIT":    "0",
		// Daemons of parallel tests must not fight over a port.
		"READSYNC_HTTP_ADDR": "127.0.0.1:0",
	}}
}

// WriteSchedules writes a schedules file with one schedule.
func WriteSchedules(t *testing.T, path, name, spec string, names []string) {
	t.Helper()
	quoted := make([]string, len(names))
	for i, n := range names {
		b, _ := json.Marshal(n) // a JSON string is a valid YAML double-quoted scalar
		quoted[i] = string(b)
	}
	doc := fmt.Sprintf("schedules:\n  - name: %s\n    cron: %q\n    nft_names: [%s]\n", name, spec, strings.Join(quoted, ", "))
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// WriteScheduleList writes a schedules file of one schedule per list of
// names, named s0, s1, … in order, all on the cron spec.
func WriteScheduleList(t *testing.T, path, spec string, lists ...[]string) {
	t.Helper()
	var doc strings.Builder
	doc.WriteString("schedules:\n")
	for i, names := range lists {
		fmt.Fprintf(&doc, "  - name: s%d\n    cron: %q\n    nft_names:\n", i, spec)
		for _, n := range names {
			fmt.Fprintf(&doc, "      - %q\n", n)
		}
	}
	WriteFile(t, path, doc.String())
}

// WriteSchedules replaces the fixture's schedules file.
func (f *Fixture) WriteSchedules(t *testing.T, name, spec string, names []string) {
	t.Helper()
	WriteSchedules(t, f.Env["READSYNC_SCHEDULES_FILE"], name, spec, names)
}

// NoSecrets fails the test if out contains any of the fixture's secrets.
func (f *Fixture) NoSecrets(t *testing.T, out string) {
	t.Helper()
	for _, s := range f.Secrets {
		if strings.Contains(out, s) {
			t.Errorf("output leaks the secret %q", s)
		}
	}
}

// Query scans the one row of q, in which {db} stands for the fixture's
// database.
func (f *Fixture) Query(t *testing.T, q string, dest ...any) {
	t.Helper()
	q = strings.ReplaceAll(q, "{db}", "`"+f.DB.Name+"`")
	if err := f.DB.Conn.QueryRow(context.Background(), q).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// NamesOf lists the projects' nft names.
func NamesOf(projects []apitest.Project) []string {
	names := make([]string, len(projects))
	for i, p := range projects {
		names[i] = p.NFT
	}
	return names
}

// LockedBuffer is a log destination shared by a running daemon and the
// test reading it.
type LockedBuffer struct {
	mu gosync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Eventually polls cond until it holds or a generous deadline passes, and
// then fails the test with what it waited for and the log.
func Eventually(t *testing.T, what string, cond func() bool, log func() string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; log:\n%s", what, log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitStarted waits until the daemon whose log this is has done its start:
// migrations, the record of missed ticks, the schedules armed. A test that
// stops the daemon sooner would stop it in the middle of a statement, and
// the current release's embedded test server aborts when a client drops a
// connection there.
func WaitStarted(t *testing.T, log func() string) {
	t.Helper()
	Eventually(t, "the daemon started", func() bool { return strings.Contains(log(), `"msg":"daemon started"`) }, log)
}

// ListenerURL waits for the daemon's log to announce its listener and
// returns the listener's base URL.
func ListenerURL(t *testing.T, log func() string) string {
	t.Helper()
	listenLine := regexp.MustCompile(`"msg":"serving health and metrics","addr":"([^"]+)"`)
	var base string
	Eventually(t, "the listener", func() bool {
		m := listenLine.FindStringSubmatch(log())
		if m != nil {
			base = "http://" + m[1]
		}
		return m != nil
	}, log)
	return base
}

// Get fetches a path from the daemon's listener.
func Get(t *testing.T, base, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// PassedOK reports whether metrics, a /metrics page, counts a pass of the
// schedule that ended ok at a cron tick.
func PassedOK(metrics, schedule string) bool {
	return regexp.MustCompile(`(?m)^readsync_passes_total\{schedule="` + regexp.QuoteMeta(schedule) + `",status="ok",trigger="cron"\} [1-9]`).MatchString(metrics)
}

// DeleteRows deletes the rows of one of the fixture's tables that match
// where (see sinktest.DB.DeleteRows).
func (f *Fixture) DeleteRows(t *testing.T, table, where string) { f.DB.DeleteRows(t, table, where) }

// WriteFile writes a file of the test, failing it on an error.
func WriteFile(t *testing.T, file, content string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// CopyFile copies a file of the test, failing it on an error.
func CopyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
