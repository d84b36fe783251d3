package app

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/sink/sinktest"
)

// migrationsFor returns the latest migration that the fixture's server can
// apply, and how --check lists them all pending: migration 4 needs
// insert deduplication tokens and migration 13 column codecs, which 18.16
// lacks both of.
func migrationsFor(t *testing.T, f *fixture) (int, string) {
	t.Helper()
	const last = `5 "schedule coverage", 6 "reads gained", 7 "derived history that repairs itself", 8 "reconcile in bounded steps", 9 "snapshots sorted by project snapshot", 10 "name health", 11 "record of expiry", 12 "hourly resolution"`
	pending := `1 "create tables and views", 2 "dashboard rollups", 3 "views in the form current releases accept", `
	var n uint64
	f.Query(t, "SELECT (SELECT count() FROM system.settings WHERE name = 'insert_deduplication_token') * "+
		"(SELECT count() FROM system.merge_tree_settings WHERE name = 'non_replicated_deduplication_window')", &n)
	if n == 0 {
		return 17, pending + last + `, 14 "name failures by the hour", 15 "project tips and the record of refreshes", 16 "reads by message age", 17 "message speeds stored"`
	}
	return 17, pending + `4 "remember the last INSERTs to drop a repeated one", ` + last + `, 13 "compact storage", 14 "name failures by the hour", 15 "project tips and the record of refreshes", 16 "reads by message age", 17 "message speeds stored"`
}

// --check reports a pending schema without creating anything; --migrate
// applies it and exits 0; --check then reports it current.
func TestMigrateFlag(t *testing.T) {
	f := newFixture(t, []string{"p.eth"}, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth"}))
	latest, pending := migrationsFor(t, f)
	code, stdout, stderr := f.run(t, "--check")
	if code != ExitOK || !strings.Contains(stdout, `schema version 0, pending: `+pending+`; this server takes them (tried in a scratch database); readsync --migrate`) {
		t.Fatalf("--check on an empty server: exit %d:\n%s%s", code, stdout, stderr)
	}
	var dbs uint64
	f.Query(t, "SELECT count() FROM system.databases WHERE name = '"+f.DB.Name+"'", &dbs)
	if dbs != 0 {
		t.Fatal("--check created the database")
	}

	code, stdout, stderr = f.run(t, "--migrate")
	if code != ExitOK || !strings.Contains(stdout, fmt.Sprintf("at schema version %d, current", latest)) {
		t.Fatalf("--migrate: exit %d:\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, `"msg":"migration applied","migration":1`) {
		t.Errorf("--migrate did not log the migration:\n%s", stderr)
	}
	var tables uint64
	f.Query(t, "SELECT count() FROM system.tables WHERE database = '"+f.DB.Name+"'", &tables)
	// Four tables, six views, schema_migrations; four rollups with their
	// materialized views, the two day rollups, the gains rollup and the
	// record of folds; the two change logs with theirs, the legacy
	// schedules and the record of reconciles; the record of the move of
	// the snapshot table onto its sort key; the names' failures and
	// successes and the view of their health; the record of expiry; the
	// hourly resolution's three rollups, its materialized view and two
	// views; the names' failures by the hour with its materialized view;
	// the tip rollup and the record of refreshes; the age rollup and its
	// three views; the speed rollup.
	if tables != 49 {
		t.Errorf("%d tables and views after --migrate, want 49", tables)
	}
	code, stdout, _ = f.run(t, "--check")
	if code != ExitOK || !strings.Contains(stdout, fmt.Sprintf("schema version %d, current", latest)) {
		t.Errorf("--check after --migrate: exit %d:\n%s", code, stdout)
	}
	// A later release migrated the database further: said, not an error.
	if err := f.DB.Conn.Exec(context.Background(), "INSERT INTO "+f.DB.Table("schema_migrations")+
		" (id, name, applied_at, duration_ms) SELECT 99, 'a later step', now(), 0"); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = f.run(t, "--check")
	if code != ExitOK || !strings.Contains(stdout, fmt.Sprintf("schema version 99, newer than this readsync's %d", latest)) {
		t.Errorf("--check on a newer schema: exit %d:\n%s", code, stdout)
	}
}

// A migration that fails makes --migrate exit 1 with the migration's name.
func TestMigrateFlagFails(t *testing.T) {
	f := newFixture(t, []string{"p.eth"})
	f.Env["READSYNC_CLICKHOUSE_DSN"] = f.DB.DSN + "?readonly=2" // the server refuses DDL
	code, _, stderr := f.run(t, "--migrate")
	if code != ExitFailed || !strings.Contains(stderr, `readsync: migrate: ClickHouse refused: migration 1 "create tables and views": `) ||
		!strings.Contains(stderr, "to fix: the ClickHouse user of READSYNC_CLICKHOUSE_DSN lacks a right") {
		t.Errorf("--migrate without DDL rights: exit %d:\n%s", code, stderr)
	}
}

// A cluster name the server does not know is said plainly, by --check and
// --migrate, naming the clusters it does know.
func TestUnknownCluster(t *testing.T) {
	f := newFixture(t, []string{"p.eth"}, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth"}))
	f.Env["READSYNC_CLICKHOUSE_CLUSTER"] = "no_such_cluster"
	want := `cluster "no_such_cluster" is not in the server's remote_servers (it has: `
	code, stdout, stderr := f.run(t, "--check")
	if code != ExitFailed || !strings.Contains(stdout, "clickhouse: FAILED: READSYNC_CLICKHOUSE_CLUSTER: "+want) {
		t.Errorf("--check: exit %d:\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = f.run(t, "--migrate")
	if code != ExitFailed || !strings.Contains(stderr, want) {
		t.Errorf("--migrate: exit %d:\n%s", code, stderr)
	}
	var dbs uint64
	if err := f.DB.Conn.QueryRow(context.Background(), "SELECT count() FROM system.databases WHERE name = ?", f.DB.Name).Scan(&dbs); err != nil || dbs != 0 {
		t.Errorf("the database was created for an unknown cluster (%v)", err)
	}
}

// Three processes starting together on a database of an earlier release
// with history migrate it once: one takes the migration lock and folds
// each partition of the history, the others wait and find the schema
// current; every view then equals its brute force.
func TestProcessesStartingTogetherMigrateOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, []string{"p.eth"}, apitest.WithProjects(apitest.Project{ID: 1, NFT: "p.eth"}))
	ctx := sinktest.PreviousRelease(context.Background(), t, f.DB.Conn)
	// 0.1.0's schema, from its statements, and three months of
	// its history: three partitions to fold.
	stmts := sinktest.FirstReleaseSchema(t, "{db}")
	stmts = append(stmts,
		"INSERT INTO `{db}`.projects (id, nft, name, version) SELECT number + 1, concat('p', toString(number + 1), '.eth'), 'P', 1 FROM numbers(5)",
		"INSERT INTO `{db}`.messages (project_id, id, subject, version) SELECT intDiv(number, 20) + 1, number % 20 + 1, 's', 1 FROM numbers(100)",
		// 36 snapshots of 100 messages, 2.5 days apart from 2026-01-02:
		// each snapshot one version, read counts growing.
		`INSERT INTO `+"`{db}`"+`.message_read_snapshots (project_id, message_id, snapshot_at, read_count, total, percent, version)
SELECT intDiv(number % 100, 20) + 1, number % 20 + 1, toDateTime('2026-01-02 00:00:00', 'UTC') + intDiv(number, 100) * 216000,
    intDiv(number, 100) + number % 7, 50, 0, intDiv(number, 100) + 1
FROM numbers(3600)`)
	for _, stmt := range stmts {
		if stmt = strings.TrimSpace(strings.ReplaceAll(stmt, "{db}", f.DB.Name)); stmt != "" {
			if err := f.DB.Conn.Exec(ctx, stmt); err != nil {
				t.Fatalf("%v\n%s", err, stmt)
			}
		}
	}

	var procs []*apptest.Process
	for range 3 {
		procs = append(procs, f.StartReadsync(t, "--migrate"))
	}
	var logs strings.Builder
	for i, p := range procs {
		if code := p.Wait(); code != ExitOK {
			t.Errorf("process %d: exit %d\n%s", i, code, p.Log.String())
		}
		logs.WriteString(p.Log.String())
	}
	for what, want := range map[string]int{
		`"msg":"folded snapshot partition"`:               3,
		`"msg":"computed reads gained"`:                   1,
		`"msg":"migration applied","migration":7`:         1,
		`"msg":"waiting for another process's migration"`: 2,
	} {
		if got := strings.Count(logs.String(), what); got != want {
			t.Errorf("%d log lines %s in the three processes, want %d:\n%s", got, what, want, logs.String())
		}
	}
	var folds uint64
	f.Query(t, "SELECT count() FROM {db}.project_read_snapshot_rollup_folds WHERE partition != ''", &folds)
	if folds != 3 {
		t.Errorf("%d partitions recorded folded into the summing rollup, want each of the 3 once", folds)
	}
	if code, stdout, stderr := f.run(t, "--verify"); code != ExitOK {
		t.Errorf("--verify after the migration: exit %d\n%s%s", code, stdout, stderr)
	}
}
