package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
)

// openTest connects to the database of dsn on one server.
func openTest(t *testing.T, dsn string) *chconn.Conn { return openOn(t, dsn, chconn.Topology{}) }

// openOn connects to the database of dsn, whose tables live on topo.
func openOn(t *testing.T, dsn string, topo chconn.Topology) *chconn.Conn {
	t.Helper()
	d, err := chconn.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chconn.Open(d, topo, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// noGains stands in for the fold of reads gained that migration 7 runs,
// package derived's, which this package's tests cannot import. They check
// the schema; the tests of package clickhouse migrate with the fold.
func noGains(context.Context, *chconn.Conn, *slog.Logger, func(context.Context) error) error {
	return nil
}

// write inserts the rows of b as ClickHouse.Write does, without the
// refresh of the derived rows that follows there (package derived's).
func write(t *testing.T, c *chconn.Conn, b *sink.Batch) {
	t.Helper()
	ctx := context.Background()
	for _, err := range []error{chconn.Insert(ctx, c, schema.ProjectsTable, b, b.Projects), chconn.Insert(ctx, c, schema.MessagesTable, b, b.Messages),
		chconn.Insert(ctx, c, schema.SnapshotsTable, b, b.Snapshots)} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func appliedIDs(t *testing.T, db *sinktest.DB) []uint32 {
	t.Helper()
	ids, err := chconn.QueryColumn[uint32](context.Background(), db.Conn, "SELECT id FROM "+db.Table(migrationsTable)+" FINAL ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// builtinIDs are the ids of readsync's own migrations that the server of
// dsn can apply, in order.
func builtinIDs(t *testing.T, dsn string) []uint32 {
	t.Helper()
	server, err := openTest(t, dsn).Server(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	for _, m := range applicable(migrations(), server) {
		ids = append(ids, m.id)
	}
	return ids
}

// withColumn is the built-in history plus a step of the kind a later
// release adds: a column, through the race-safe Go path.
func withColumn() []migration {
	return append(migrations(), migration{id: 1000, name: "add projects.note", run: func(ctx context.Context, m *migrator) error {
		return m.addColumn(ctx, "projects", "note", "String", "raw")
	}})
}

func TestMigrateRecordsEachStepOnce(t *testing.T) {
	db := sinktest.New(t)
	ch := openTest(t, db.DSN)
	ctx := context.Background()
	v, err := ReadVersion(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if v.Current() || v.Applied != 0 || v.Adopt {
		t.Fatalf("empty database: %+v, want everything pending", v)
	}
	for range 2 {
		if err := runMigrations(ctx, ch, noGains, withColumn()); err != nil {
			t.Fatal(err)
		}
	}
	if got := appliedIDs(t, db); !slices.Equal(got, append(builtinIDs(t, db.DSN), 1000)) {
		t.Errorf("schema_migrations holds %v, want %v once each", got, append(builtinIDs(t, db.DSN), 1000))
	}
	v, _, err = schemaVersion(ctx, ch, withColumn())
	if err != nil {
		t.Fatal(err)
	}
	if !v.Current() || v.Applied != 1000 || v.Latest != 1000 {
		t.Errorf("after migrating: %+v, want current at 1000", v)
	}
}

// When the schema is current, starting only reads. The proof is a
// connection the server refuses every write and DDL on (readonly=2): it
// migrates a current database without error, and fails as soon as a step
// is pending, which shows the check would see DDL.
func TestMigrateIssuesNoDDLWhenCurrent(t *testing.T) {
	db := sinktest.New(t)
	ctx := context.Background()
	if err := Apply(ctx, openTest(t, db.DSN), noGains); err != nil {
		t.Fatal(err)
	}
	ro := openTest(t, db.DSN+"?readonly=2")
	if err := Apply(ctx, ro, noGains); err != nil {
		t.Fatalf("a current schema needed more than reads: %v", err)
	}
	err := runMigrations(ctx, ro, noGains, withColumn())
	if err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Fatalf("a pending step on a read-only connection: %v, want the server's readonly refusal", err)
	}
}

// Processes that start together (daemon replicas, a Job beside the daemon)
// each migrate from their own connection; all succeed and the schema ends
// the same, each step recorded, the added column there once.
func TestMigrateRace(t *testing.T) {
	db := sinktest.New(t)
	raceMigrations(t, func(int) *chconn.Conn { return openTest(t, db.DSN) })
	if got := appliedIDs(t, db); !slices.Equal(got, append(builtinIDs(t, db.DSN), 1000)) {
		t.Errorf("schema_migrations holds %v, want %v", got, append(builtinIDs(t, db.DSN), 1000))
	}
	var n uint64
	if err := db.Conn.QueryRow(context.Background(), "SELECT count() FROM system.columns WHERE database = ? AND table = 'projects' AND name = 'note'",
		db.Name).Scan(&n); err != nil || n != 1 {
		t.Errorf("projects.note: %d columns, %v", n, err)
	}
}

// raceMigrations runs withColumn's migrations from several connections at
// once and fails the test if any of them fails.
func raceMigrations(t *testing.T, open func(i int) *chconn.Conn) {
	t.Helper()
	const processes = 4
	chs := make([]*chconn.Conn, processes)
	for i := range chs {
		chs[i] = open(i)
	}
	errs := make([]error, processes)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, ch := range chs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = runMigrations(context.Background(), ch, noGains, withColumn())
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v", i, err)
		}
	}
}

func TestMigrateAdoptsPreviousRelease(t *testing.T) {
	db := sinktest.New(t)
	ctx := context.Background()
	applyPreviousRelease(t, db.Conn, db.Name)
	// Rows as that release wrote them, with its column lists. (INSERT …
	// SELECT: the driver does not send inline VALUES to 18.16.)
	for _, q := range []string{
		"INSERT INTO {t}.projects (id, nft, name, description, logo, type, wallet_address, create_at, raw, fetched_at, version) " +
			"SELECT 1, 'alpha.eth', 'Alpha', 'd', 'l', 2, 'w', toDateTime('2026-01-01 00:00:00', 'UTC'), '{}', toDateTime('2026-03-01 00:00:00', 'UTC'), 1",
		"INSERT INTO {t}.messages (project_id, id, sender, recv_group, receivers, subject, type, is_all_subscribers, create_at, fetched_at, version) " +
			"SELECT 1, 10, 's', 'g', ['a','b'], 'hello', 1, 1, toDateTime('2026-01-01 00:00:00', 'UTC'), toDateTime('2026-03-01 00:00:00', 'UTC'), 1",
		"INSERT INTO {t}.message_read_snapshots (project_id, message_id, snapshot_at, read_count, total, percent, fetched_at, version) " +
			"SELECT 1, 10, toDateTime(concat('2026-03-0', toString(number + 1), ' 00:00:00'), 'UTC'), 3 + 2 * number, 10, 30 + 20 * number, " +
			"toDateTime('2026-03-01 00:00:00', 'UTC'), number + 1 FROM system.numbers LIMIT 2",
		"INSERT INTO {t}.sync_runs (run_id, schedule, trigger, snapshot_at, started_at, finished_at, nft_total, nft_ok, nft_failed, messages, status, error) " +
			"SELECT 'old', 'hourly', 'cron', toDateTime('2026-03-02 00:00:00', 'UTC'), toDateTime('2026-03-02 00:00:00', 'UTC'), " +
			"toDateTime('2026-03-02 00:00:01', 'UTC'), 1, 1, 0, 1, 'ok', ''",
	} {
		if err := db.Conn.Exec(ctx, strings.ReplaceAll(q, "{t}", "`"+db.Name+"`")); err != nil {
			t.Fatal(err)
		}
	}
	partsBefore := partNames(t, db)

	ch := openTest(t, db.DSN)
	v, err := ReadVersion(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Adopt || v.Current() {
		t.Fatalf("previous release's database: %+v, want adoption pending", v)
	}
	if err := Apply(ctx, ch, noGains); err != nil {
		t.Fatal(err)
	}
	if got := appliedIDs(t, db); !slices.Equal(got, builtinIDs(t, db.DSN)) {
		t.Errorf("schema_migrations holds %v, want %v", got, builtinIDs(t, db.DSN))
	}
	// No data rewritten: the same parts hold the rows (the rollups are
	// new tables, derived from them).
	if after := partNames(t, db); after != partsBefore {
		t.Errorf("parts changed by adoption:\nbefore %s\nafter  %s", partsBefore, after)
	}
	var (
		name, subject string
		receivers     []string
		reads         uint64
		runs          uint64
	)
	q := func(query string, dest ...any) {
		t.Helper()
		if err := db.Conn.QueryRow(ctx, strings.ReplaceAll(query, "{t}", "`"+db.Name+"`")).Scan(dest...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	q("SELECT name FROM {t}.projects FINAL", &name)
	q("SELECT subject, receivers FROM {t}.messages FINAL", &subject, &receivers)
	q("SELECT sum(read_count) FROM {t}.message_read_snapshots FINAL", &reads)
	q("SELECT count() FROM {t}.sync_runs", &runs)
	if name != "Alpha" || subject != "hello" || len(receivers) != 2 || reads != 8 || runs != 1 {
		t.Errorf("rows after adoption: name %q subject %q receivers %q reads %d runs %d", name, subject, receivers, reads, runs)
	}
	var latest uint64
	var nft string
	q("SELECT read_count, nft FROM {t}.message_read_latest", &latest, &nft)
	var dailyReads uint64
	var days uint64
	q("SELECT count(), max(reads) FROM {t}.project_read_daily", &days, &dailyReads)
	if latest != 5 || nft != "alpha.eth" || days != 2 || dailyReads != 5 {
		t.Errorf("views after adoption: latest %d %q, daily %d days max %d", latest, nft, days, dailyReads)
	}

	// The new code writes into the adopted tables.
	at := sink.TimeOf(time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC))
	write(t, ch, &sink.Batch{Snapshots: []sink.Snapshot{{ProjectID: 1, MessageID: 10, SnapshotAt: at, ReadCount: 7, Total: 10, Percent: 70, FetchedAt: at, Version: 3}}})
	q("SELECT read_count FROM {t}.message_read_latest", &latest)
	if latest != 7 {
		t.Errorf("latest read_count %d after a new write, want 7", latest)
	}
}

// applyPreviousRelease creates the schema as 0.1.0 did, from its
// statements kept in testdata rather than from this code.
func applyPreviousRelease(t *testing.T, conn driver.Conn, database string) {
	t.Helper()
	ctx := sinktest.PreviousRelease(context.Background(), t, conn)
	for _, stmt := range sinktest.FirstReleaseSchema(t, database) {
		if err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

func partNames(t *testing.T, db *sinktest.DB) string {
	t.Helper()
	names, err := chconn.QueryColumn[string](context.Background(), db.Conn,
		"SELECT concat(table, '/', name) FROM system.parts WHERE active AND database = ? AND table IN ('projects', 'messages', 'message_read_snapshots', 'sync_runs') ORDER BY table, name", db.Name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, " ")
}

// createCounts creates a test's table of snapshot counts by project and
// month, with engine: on a cluster, a replicated local table on every host
// and a Distributed one over it, sharded by project, as the schema's
// tables are.
func createCounts(ctx context.Context, m *migrator, table, engine string) error {
	d := m.ddl
	stmts := []string{fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s (project_id Int64, month UInt32, snapshots UInt64) ENGINE = %s\nORDER BY (project_id, month)",
		d.Local(table), d.OnCluster(), d.Engine(engine, ""))}
	if d.Clustered() {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s AS %s ENGINE = Distributed(%s, %s, %s, cityHash64(project_id))",
			d.Table(table), d.OnCluster(), d.Local(table), chconn.QuoteIdent(d.Topology().Cluster), d.QuotedDatabase(), chconn.QuoteIdent(d.LocalName(table))))
	}
	for _, q := range stmts {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// A Go migration of the kind that folds existing rows into a new table a
// partition at a time: it finds every partition and moves each with one
// INSERT … SELECT, on a single server and through a cluster alike.
func TestGoMigrationFoldsByPartition(t *testing.T) {
	fold := migration{id: 1001, name: "fold snapshot counts", run: func(ctx context.Context, m *migrator) error {
		if err := createCounts(ctx, m, "snapshot_counts", "ReplacingMergeTree"); err != nil {
			return err
		}
		parts, err := m.partitions(ctx, "message_read_snapshots")
		if err != nil {
			return err
		}
		for _, p := range parts {
			m.log.Info("folding partition", "partition", p)
			if err := m.conn.Exec(ctx, "INSERT INTO "+m.ddl.Table("snapshot_counts")+" (project_id, month, snapshots) "+
				"SELECT project_id, toYYYYMM(snapshot_at) AS month, count() FROM "+m.ddl.Table("message_read_snapshots")+
				" WHERE toYYYYMM(snapshot_at) = "+p+" GROUP BY project_id, month"); err != nil {
				return fmt.Errorf("partition %s: %w", p, err)
			}
		}
		return nil
	}}
	history := append(migrations(), fold)
	write := func(t *testing.T, ch *chconn.Conn) {
		t.Helper()
		ctx := context.Background()
		if err := Apply(ctx, ch, noGains); err != nil {
			t.Fatal(err)
		}
		b := &sink.Batch{}
		for _, month := range []time.Month{1, 2, 3} {
			for p := int64(1); p <= 4; p++ {
				at := sink.TimeOf(time.Date(2026, month, 1, 0, 0, 0, 0, time.UTC))
				b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: 1, SnapshotAt: at, FetchedAt: at, Version: 1},
					sink.Snapshot{ProjectID: p, MessageID: 2, SnapshotAt: at, FetchedAt: at, Version: 1})
			}
		}
		write(t, ch, b)
		if err := runMigrations(ctx, ch, noGains, history); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("single server", func(t *testing.T) {
		db := sinktest.New(t)
		write(t, openTest(t, db.DSN))
		var rows, total uint64
		if err := db.Conn.QueryRow(context.Background(), "SELECT count(), sum(snapshots) FROM "+db.Table("snapshot_counts")).Scan(&rows, &total); err != nil {
			t.Fatal(err)
		}
		if rows != 12 || total != 24 {
			t.Errorf("snapshot_counts: %d rows summing to %d, want 12 rows (4 projects × 3 months) summing to 24", rows, total)
		}
	})
	t.Run("sharded", func(t *testing.T) {
		c := sinktest.NewCluster(t, sinktest.Sharded)
		write(t, openCluster(t, c, 0))
		for node, conn := range c.Conns {
			var rows, total uint64
			if err := conn.QueryRow(context.Background(), "SELECT count(), sum(snapshots) FROM "+c.Table("snapshot_counts")).Scan(&rows, &total); err != nil {
				t.Fatal(err)
			}
			if rows != 12 || total != 24 {
				t.Errorf("node %d: snapshot_counts: %d rows summing to %d, want 12 summing to 24", node, rows, total)
			}
		}
	})
}

func TestAlreadyDone(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"table exists", &clickhouse.Exception{Code: 57, Message: "Table d.t already exists."}, true},
		{"replica exists", &clickhouse.Exception{Code: 253, Message: "Replica /x/replicas/r already exists."}, true},
		{"column exists, 18.16", &clickhouse.Exception{Code: 44, Message: "Cannot add column note: column with this name already exists"}, true},
		{"other illegal column", &clickhouse.Exception{Code: 44, Message: "Sorting key cannot contain nullable columns"}, false},
		{"on a host of the cluster", fmt.Errorf("wrapped: %w", &clickhouse.Exception{Code: 65,
			Message: "There was an error on [h:9000]: Code: 57, e.displayText() = DB::Exception: Table d.t already exists."}), true},
		{"readonly", &clickhouse.Exception{Code: 164, Message: "Cannot execute query in readonly mode"}, false},
		{"not from the server", errors.New("connection refused"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := alreadyDone(tt.err); got != tt.want {
				t.Errorf("alreadyDone(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// In cluster mode, a database holding single-server tables under the
// names the Distributed tables need is refused before any DDL.
func TestClusterRefusesSingleServerTables(t *testing.T) {
	c := sinktest.NewCluster(t, sinktest.Sharded)
	applyPreviousRelease(t, c.Conns[0], c.Database)
	err := Apply(context.Background(), openCluster(t, c, 0), noGains)
	if err == nil || !strings.Contains(err.Error(), "holds single-server tables (projects is ReplacingMergeTree)") {
		t.Fatalf("migrate: %v, want a refusal naming the single-server tables", err)
	}
	if got := engines(t, c, 0); len(got) != 6 {
		t.Errorf("tables after the refusal: %v, want the 6 single-server ones only", got)
	}
}

// A database set up by 0.2.0 on 18.16 has schema version 2 and
// views that join subqueries without aliases. Once its server is upgraded
// to a current release, those views fail for every reader; migration 3
// writes them again, and they answer with the server's default settings.
func TestMigration3MendsViewsAfterServerUpgrade(t *testing.T) {
	db := sinktest.New(t)
	ch := openTest(t, db.DSN)
	ctx := context.Background()
	if err := runMigrations(ctx, ch, noGains, migrations()[:2]); err != nil {
		t.Fatal(err)
	}
	// The views as that release wrote them: the same queries without the
	// aliases, created as 18.16 took them.
	legacy := sinktest.PreviousRelease(ctx, t, db.Conn)
	unaliased := strings.NewReplacer(") AS l\n", ")\n", ") AS r USING", ") USING")
	for _, q := range schema.RollupViewsDDL(schema.DDL{Names: ch.Names()}) {
		old := unaliased.Replace(q)
		if strings.HasPrefix(q, "CREATE") && old == q {
			t.Fatalf("no alias to remove:\n%s", q)
		}
		if err := db.Conn.Exec(legacy, old); err != nil {
			t.Fatalf("%v\n%s", err, old)
		}
	}
	read := func(v string) error {
		rows, err := db.Conn.Query(ctx, "SELECT * FROM "+db.Table(v))
		if err == nil {
			err = rows.Close()
		}
		return err
	}
	if legacy != ctx { // a current release: the bug this migration mends
		if err := read(schema.LatestView); err == nil {
			t.Fatal("a view without aliases answers on this server with its defaults; the test shows nothing")
		}
		if err := CheckViews(ctx, ch); err == nil {
			t.Error("CheckViews passes views the server refuses")
		}
	}
	if err := Apply(ctx, ch, noGains); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{schema.LatestView, schema.DailyView, schema.SnapshotView} {
		if err := read(v); err != nil {
			t.Errorf("view %s after migration 3: %v", v, err)
		}
	}
	if got := appliedIDs(t, db); !slices.Equal(got, builtinIDs(t, db.DSN)) {
		t.Errorf("applied %v, want %v", got, builtinIDs(t, db.DSN))
	}
}

// A migration the server rejects is a refusal, not an outage: the error
// names the step, sink.Refused says what to do, and the step is not
// recorded, so the next start tries it again.
func TestRejectedMigrationIsARefusal(t *testing.T) {
	db := sinktest.New(t)
	ch := openTest(t, db.DSN)
	ctx := context.Background()
	bad := migration{id: 1001, name: "a view this server rejects", sql: func(d schema.DDL) []string {
		return []string{"CREATE VIEW IF NOT EXISTS " + d.Table("rejected") + " AS SELECT no_such_function_of_clickhouse(1)"}
	}}
	err := runMigrations(ctx, ch, noGains, append(migrations(), bad))
	if err == nil {
		t.Fatal("the server took a view of an unknown function")
	}
	if !strings.Contains(err.Error(), `migration 1001 "a view this server rejects": `) {
		t.Errorf("error does not name the step: %v", err)
	}
	if fix, ok := sink.Refused(err); !ok || !strings.Contains(fix, "does not accept a statement of readsync's") {
		t.Errorf("Refused(%v) = %q, %v; want a refusal naming the dialect", err, fix, ok)
	}
	if slices.Contains(appliedIDs(t, db), 1001) {
		t.Error("the rejected step was recorded")
	}
	// An outage is not a refusal.
	if _, ok := sink.Refused(errors.New("dial tcp 127.0.0.1:9000: connect: connection refused")); ok {
		t.Error("a refused connection counts as a refusal")
	}
}

// A fold by project splits each month into ranges of whole projects of
// at most foldRows source rows, a larger project alone, and folds every
// project of every month exactly once.
func TestFoldByProjectBoundsEachInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := sinktest.New(t)
	c := openTest(t, db.DSN)
	if err := Apply(ctx, c, noGains); err != nil {
		t.Fatal(err)
	}
	// Each month: project 1 and 2 two rows each, 3 six, 4 one, 5 two.
	perProject := map[int64]int{1: 2, 2: 2, 3: 6, 4: 1, 5: 2}
	b := &sink.Batch{}
	for _, month := range []time.Month{1, 2} {
		for p, n := range perProject {
			for i := range n {
				at := sink.TimeOf(time.Date(2026, month, 1+i, 0, 0, 0, 0, time.UTC))
				b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p, MessageID: 1, SnapshotAt: at, FetchedAt: at, Version: 1})
			}
		}
	}
	write(t, c, b)
	var stmts []string
	fold := migration{id: 1002, name: "fold by project", run: func(ctx context.Context, m *migrator) error {
		if err := createCounts(ctx, m, "project_counts", "MergeTree"); err != nil {
			return err
		}
		m.foldRows = 4
		return m.foldMonthsByProject(ctx, schema.SnapshotsTable.Name(), "snapshot_at", "project_counts", "folded", func(month, projects string) string {
			q := fmt.Sprintf("INSERT INTO %s SELECT project_id, toUInt32(%s), count() FROM %s WHERE toYYYYMM(snapshot_at) = %s AND %s GROUP BY project_id",
				m.ddl.Table("project_counts"), month, m.ddl.Table(schema.SnapshotsTable.Name()), month, projects)
			stmts = append(stmts, projects)
			return q
		})
	}}
	if err := runMigrations(ctx, c, noGains, append(migrations(), fold)); err != nil {
		t.Fatal(err)
	}
	want := []string{"project_id BETWEEN 1 AND 2", "project_id BETWEEN 3 AND 3", "project_id BETWEEN 4 AND 5"}
	if wantBoth := append(slices.Clone(want), want...); !slices.Equal(stmts, wantBoth) {
		t.Errorf("the fold's ranges: %q, want %q in each month", stmts, want)
	}
	got := sinktest.Lines(t, db.Conn, "SELECT concat(toString(project_id), ' ', toString(month), ' ', toString(snapshots)) AS r FROM "+db.Table("project_counts")+" ORDER BY r")
	var exp []string
	for _, month := range []string{"202601", "202602"} {
		for p, n := range perProject {
			exp = append(exp, fmt.Sprintf("%d %s %d", p, month, n))
		}
	}
	slices.Sort(exp)
	if !slices.Equal(got, exp) {
		t.Errorf("project_counts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
	}
}
