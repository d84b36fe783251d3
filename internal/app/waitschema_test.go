package app

import (
	"net/http"
	"strings"
	"testing"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
)

// A daemon started before the migrations, with READSYNC_MIGRATIONS=wait
// (the chart's, whose hook Job runs readsync --migrate), creates nothing
// and is not ready; its passes spool their rows. Once --migrate has run,
// it becomes ready and delivers what it spooled.
func TestDaemonWaitsForTheSchema(t *testing.T) {
	projects := apitest.Generate(2, 2, 12)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	f.Env["READSYNC_MIGRATIONS"] = "wait"
	f.Env["READSYNC_SPOOL_FLUSH_INTERVAL"] = "100ms"
	f.WriteSchedules(t, "fast", "@every 1s", apptest.NamesOf(projects))

	log, stop := f.startDaemon(t)
	base := apptest.ListenerURL(t, log.String)
	apptest.Eventually(t, "the daemon waiting for the schema", func() bool {
		return strings.Contains(log.String(), `"msg":"waiting for the schema: readsync --migrate applies the migrations (READSYNC_MIGRATIONS=wait); rows will be spooled until then","applied":0,`)
	}, log.String)
	apptest.Eventually(t, "a pass's rows spooled", func() bool {
		_, m := apptest.Get(t, base, "/metrics")
		return strings.Contains(m, "readsync_spool_entries ") && !strings.Contains(m, "readsync_spool_entries 0\n")
	}, log.String)
	code, body := apptest.Get(t, base, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "the schema is at migration 0 and this readsync needs") ||
		!strings.Contains(body, "waiting for readsync --migrate to apply 1 \"create tables and views\"") {
		t.Errorf("/readyz before the migrations: %d %q, want 503 saying it waits for them", code, body)
	}
	var tables uint64
	f.Query(t, "SELECT count() FROM system.tables WHERE database = '"+f.DB.Name+"'", &tables)
	if tables != 0 {
		t.Fatalf("the waiting daemon created %d tables", tables)
	}

	if code, stdout, stderr := f.run(t, "--migrate"); code != ExitOK {
		t.Fatalf("--migrate: exit %d:\n%s%s", code, stdout, stderr)
	}
	apptest.Eventually(t, "readiness once migrated", func() bool { c, _ := apptest.Get(t, base, "/readyz"); return c == http.StatusOK }, log.String)
	apptest.Eventually(t, "the spooled rows delivered", func() bool {
		var n uint64
		f.Query(t, "SELECT count() FROM "+f.DB.Name+".message_read_snapshots", &n)
		return n > 0 && strings.Contains(log.String(), `"msg":"spool flushed"`)
	}, log.String)
	apptest.WaitStarted(t, log.String)
	if code := stop(); code != ExitOK {
		t.Errorf("daemon exit %d", code)
	}
	if strings.Contains(log.String(), `"msg":"migration applied"`) {
		t.Error("the waiting daemon applied a migration")
	}
}
