package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// migration is one step of the schema's history. Each runs once per
// database, in the order of its id, and is recorded in schema_migrations
// when it has succeeded.
//
// Several processes may start at once (daemon replicas, a Job beside the
// daemon), and a process may die between a step and its record, so every
// step must be safe to run again and to run concurrently with itself:
// CREATE … IF NOT EXISTS, migrator.addColumn rather than a bare ALTER,
// data folds that give the same result when repeated.
type migration struct {
	// id orders the steps and names them in schema_migrations: positive,
	// increasing, never reused.
	id uint32
	// name says what the step does, in logs and errors.
	name string
	// Exactly one of sql and run is set.
	//
	// sql returns the statements of a step that is only DDL. Build them
	// with d, which names the tables and adds ON CLUSTER as the topology
	// needs.
	sql func(d schema.DDL) []string
	// run is a step that needs Go: a check, a column added only when
	// missing, a data fold run a partition at a time.
	run func(ctx context.Context, m *migrator) error
	// creates, set with run, returns the DDL run sends to create objects
	// or to write views again, in the order it sends them: what the step
	// creates, rendered without a server. Its checks, the columns it adds
	// when missing and its data folds are not in it.
	creates func(d schema.DDL) []string
	// requires, when set, says whether the server has what the step
	// needs. On a server without it the step is neither applied, nor
	// recorded, nor pending: it waits, and applies at the first start
	// after the server is upgraded.
	requires func(chconn.Server) bool
}

// statements is the DDL the step sends for d: its sql, or what its run
// creates.
func (m migration) statements(d schema.DDL) []string {
	if m.sql != nil {
		return m.sql(d)
	}
	return m.creates(d)
}

// migrator is what a Go migration works with.
type migrator struct {
	conn  *chconn.Conn
	ddl   schema.DDL
	log   *slog.Logger
	lock  *Lock
	gains GainsFolder
	// foldRows, when set, replaces the package's foldRows (a test's
	// smaller bound).
	foldRows uint64
}

// held returns an error when another process took the migration lock
// over: a long step (a fold) asks between its parts.
func (m *migrator) held(ctx context.Context) error { return m.lock.held(ctx) }

// exec runs one DDL statement. An answer that the object exists already
// counts as success: another process got there first.
func (m *migrator) exec(ctx context.Context, q string) error { return ExecDDL(ctx, m.conn, q) }

// ExecDDL runs one DDL statement on conn, as a migration does: an answer
// that the object exists already, or a column, counts as success, since
// another process got there first.
func ExecDDL(ctx context.Context, conn chconn.Querier, q string) error {
	if err := conn.Exec(ctx, q); err != nil && !alreadyDone(err) {
		return err
	}
	return nil
}

// partitions lists, in order, the partitions that hold rows of a data
// table (e.g. 202603 for message_read_snapshots), on every shard in
// cluster mode: what a data fold walks to work a partition at a time, in
// bounded memory.
func (m *migrator) partitions(ctx context.Context, table string) ([]string, error) {
	parts := "system.parts"
	if m.ddl.Clustered() {
		parts = fmt.Sprintf("cluster(%s, system, parts)", chconn.QuoteString(m.ddl.Topology().Cluster))
	}
	q := "SELECT DISTINCT partition FROM " + parts + " WHERE active AND database = ? AND table = ? ORDER BY partition"
	ps, err := chconn.QueryColumn[string](ctx, m.conn, q, m.ddl.Database(), m.ddl.LocalName(table))
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", table, err)
	}
	return ps, nil
}

// foldMonths runs insert's statement for each month partition of the
// table source, oldest first, to fold the history written before a
// migration into the table target: a month at a time bounds what one
// INSERT … SELECT holds, and the migration lock is checked between two.
// Each month is logged with msg.
func (m *migrator) foldMonths(ctx context.Context, source, target, msg string, insert func(month string) string) error {
	return m.foldParts(ctx, source, target, msg, func(_ context.Context, month string) ([]string, error) {
		return []string{insert(month)}, nil
	})
}

// foldRows is the most rows of its source one INSERT … SELECT of
// foldMonthsByProject reads. A fold that groups by message and hour
// holds a group per row at an hourly cadence; 2 million groups of a
// message's row take a few hundred MiB, where a month of 100 000
// messages (72 million) exceeded the 10 GiB a server allowed the query.
const foldRows = 2_000_000

// foldMonthsByProject is foldMonths for a source sorted by project_id
// first, whose fold can hold as many groups as the month has rows: each
// month is folded in ranges of projects of at most foldRows rows (a
// project with more alone), each range read by the primary key. insert
// gets the month and the condition on project_id.
func (m *migrator) foldMonthsByProject(ctx context.Context, source, timeColumn, target, msg string, insert func(month, projects string) string) error {
	limit := uint64(foldRows)
	if m.foldRows > 0 {
		limit = m.foldRows
	}
	return m.foldParts(ctx, source, target, msg, func(ctx context.Context, month string) ([]string, error) {
		q := fmt.Sprintf("SELECT project_id, count() FROM %s WHERE toYYYYMM(%s) = %s GROUP BY project_id ORDER BY project_id",
			m.ddl.Table(source), timeColumn, month)
		var (
			stmts       []string
			first, last int64
			rows        uint64
		)
		flush := func() {
			if rows > 0 {
				stmts = append(stmts, insert(month, fmt.Sprintf("project_id BETWEEN %d AND %d", first, last)))
			}
		}
		err := chconn.QueryEach(ctx, m.conn, q, func(r driver.Rows) error {
			var (
				p int64
				n uint64
			)
			if err := r.Scan(&p, &n); err != nil {
				return err
			}
			if rows > 0 && rows+n > limit {
				flush()
				rows = 0
			}
			if rows == 0 {
				first = p
			}
			last, rows = p, rows+n
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("count the rows of each project in month %s of %s: %w", month, source, err)
		}
		flush()
		return stmts, nil
	})
}

// foldParts runs, for each month partition of source, oldest first, the
// statements inserts returns for it, checking the migration lock before
// each, and logs each month with msg.
func (m *migrator) foldParts(ctx context.Context, source, target, msg string, inserts func(ctx context.Context, month string) ([]string, error)) error {
	months, err := m.partitions(ctx, source)
	if err != nil {
		return err
	}
	for i, month := range months {
		if err := m.held(ctx); err != nil {
			return err
		}
		start := time.Now()
		stmts, err := inserts(ctx, month)
		if err != nil {
			return fmt.Errorf("fold month %s of %s into %s: %w", month, source, target, err)
		}
		for j, q := range stmts {
			if j > 0 {
				if err := m.held(ctx); err != nil {
					return err
				}
			}
			if err := m.exec(ctx, q); err != nil {
				return fmt.Errorf("fold month %s of %s into %s (part %d of %d): %w", month, source, target, j+1, len(stmts), err)
			}
		}
		m.log.Info(msg, "table", target, "month", month, "parts", len(stmts), "done", i+1, "of", len(months), "duration_ms", time.Since(start).Milliseconds())
	}
	return nil
}

// onEachHost runs f with a connection to each host of the cluster in
// turn, for statements ON CLUSTER cannot run.
func (m *migrator) onEachHost(ctx context.Context, f func(driver.Conn) error) error {
	hosts, err := m.conn.ClusterHosts(ctx)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		conn, err := m.conn.OpenHost(h.Address)
		if err != nil {
			return fmt.Errorf("host %s: %w", h.Address, err)
		}
		err = f(conn)
		conn.Close()
		if err != nil {
			return fmt.Errorf("host %s: %w", h.Address, err)
		}
	}
	return nil
}

// alreadyDone reports whether err says that a concurrent process created
// the same thing first.
func alreadyDone(err error) bool {
	var ex *clickhouse.Exception
	if !errors.As(err, &ex) {
		return false
	}
	if doneCode(ex.Code, ex.Message) {
		return true
	}
	// An ON CLUSTER statement reports a host's failure under that
	// failure's code on current releases, but under its own on some older
	// ones, with the code in the text.
	for _, code := range []int32{duplicateColumn, illegalColumn, tableAlreadyExists, databaseAlreadyExists, replicaAlreadyExists} {
		if strings.Contains(ex.Message, fmt.Sprintf("Code: %d,", code)) && doneCode(code, ex.Message) {
			return true
		}
	}
	return false
}

// ClickHouse error codes.
const (
	duplicateColumn       = 15
	illegalColumn         = 44 // 18.16 answers a duplicate ADD COLUMN with it, among other things
	tableAlreadyExists    = 57
	unknownTableCode      = 60
	databaseAlreadyExists = 82
	tableIsDropped        = 218
	replicaAlreadyExists  = 253
)

func doneCode(code int32, msg string) bool {
	switch code {
	case duplicateColumn, tableAlreadyExists, databaseAlreadyExists, replicaAlreadyExists:
		return true
	case illegalColumn:
		return strings.Contains(msg, "already exists")
	}
	return false
}

// migrationsTable is the record of applied migrations. In cluster mode it
// is one replicated table on every host of the cluster, not sharded, so
// any host answers for the whole schema. ReplacingMergeTree keyed by id
// makes a step recorded twice by racing processes one row in the end;
// readers use DISTINCT, exact before any merge.
const migrationsTable = "schema_migrations"

func createMigrationsTable(d schema.DDL) string {
	eng := d.Engine("ReplacingMergeTree", "")
	if d.Clustered() {
		// One replication group across the whole cluster: the path must
		// not depend on the shard.
		path := strings.ReplaceAll(d.ReplicaPath(), "{shard}", "all")
		eng = fmt.Sprintf("ReplicatedReplacingMergeTree(%s, '{replica}')", chconn.QuoteString(path))
	}
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s%s (
    id UInt32,
    name String,
    applied_at DateTime,
    duration_ms UInt64
) ENGINE = %s
ORDER BY id`, d.Table(migrationsTable), d.OnCluster(), eng)
}

// Version is the state of a database's schema.
type Version struct {
	// Applied is the highest migration recorded, 0 for none.
	Applied uint32
	// Latest is the highest migration this readsync knows.
	Latest uint32
	// Pending lists, in order, the migrations to apply.
	Pending []string
	// Adopt is set when the database holds an earlier release's tables
	// without a record of migrations.
	Adopt bool
}

// Current reports whether nothing is pending.
func (v Version) Current() bool { return len(v.Pending) == 0 }

// schemaVersion reads what migrations the database has had, without
// changing anything, and returns the steps of ms still to apply on this
// server, in order.
func schemaVersion(ctx context.Context, c *chconn.Conn, ms []migration) (Version, []migration, error) {
	v := Version{}
	server, err := c.Server(ctx)
	if err != nil {
		return v, nil, err
	}
	ms = applicable(ms, server)
	if len(ms) > 0 {
		v.Latest = ms[len(ms)-1].id
	}
	tables, err := chconn.QueryColumn[string](ctx, c, "SELECT name FROM system.tables WHERE database = ?", c.Names().Database())
	if err != nil {
		return v, nil, fmt.Errorf("read schema version: %w", err)
	}
	applied := map[uint32]bool{}
	if slices.Contains(tables, migrationsTable) {
		ids, err := chconn.QueryColumn[uint32](ctx, c, "SELECT DISTINCT id FROM "+c.Names().Table(migrationsTable))
		if err != nil {
			return v, nil, fmt.Errorf("read %s: %w", migrationsTable, err)
		}
		for _, id := range ids {
			applied[id] = true
			v.Applied = max(v.Applied, id)
		}
	} else {
		v.Adopt = slices.Contains(tables, schema.ProjectsTable.Name())
	}
	var pending []migration
	for _, m := range ms {
		if !applied[m.id] {
			pending = append(pending, m)
			v.Pending = append(v.Pending, fmt.Sprintf("%d %q", m.id, m.name))
		}
	}
	return v, pending, nil
}

// Apply applies the migrations the database of c has not had yet, in
// order, and records each in schema_migrations. A database an earlier
// release created is adopted as it is. When the schema is current, Apply
// only reads: it issues no DDL. Concurrent calls, from this process or
// others, end with the same schema and no error. Migration 7 computes the
// reads gained of the history with gains.
func Apply(ctx context.Context, c *chconn.Conn, gains GainsFolder) error {
	return c.Redact(runMigrations(ctx, c, gains, migrations()))
}

// ApplyFirst applies the first n migrations only: the schema an earlier
// release left, for the tests that upgrade from it.
func ApplyFirst(ctx context.Context, c *chconn.Conn, gains GainsFolder, n int) error {
	return c.Redact(runMigrations(ctx, c, gains, migrations()[:n]))
}

// Last is the number of the last migration this readsync knows: the
// schema's version once every migration is applied (a server that lacks
// what a step requires may stop short of it, see migration.requires).
func Last() uint32 {
	ms := migrations()
	return ms[len(ms)-1].id
}

// ReadVersion reads which migrations the database of c has had and which
// are pending. It changes nothing.
func ReadVersion(ctx context.Context, c *chconn.Conn) (Version, error) {
	v, _, err := schemaVersion(ctx, c, migrations())
	return v, c.Redact(err)
}

// runMigrations applies the migrations of ms not yet recorded, in order. When
// none is pending it issues no DDL at all: in cluster mode, an ON CLUSTER
// statement waits for every host, and a replica that is down must not stop
// a process from starting. Otherwise it takes the migration lock first
// (lock.go), waiting while another process migrates, and reads again what
// is pending once it holds it.
func runMigrations(ctx context.Context, c *chconn.Conn, gains GainsFolder, ms []migration) error {
	v, _, err := schemaVersion(ctx, c, ms)
	if err != nil {
		return err
	}
	if v.Current() {
		return nil
	}
	if err := checkTopology(ctx, c); err != nil {
		return err
	}
	// A data fold's INSERTs through Distributed tables are on their
	// shards when the step is recorded.
	ctx = c.SyncInserts(ctx)
	ddl := schema.DDL{Names: c.Names()}
	if err := ExecDDL(ctx, c, ddl.CreateDatabase()); err != nil {
		return fmt.Errorf("migration %s: create the database: %w", v.Pending[0], err)
	}
	lock, err := TakeLock(ctx, c, 0)
	if err != nil {
		return fmt.Errorf("migration %s: %w", v.Pending[0], err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		lock.Release(rctx)
	}()
	v, pending, err := schemaVersion(ctx, c, ms)
	if err != nil || v.Current() {
		return err
	}
	if v.Adopt {
		c.Log().Info("adopting tables an earlier release created; they are kept as they are", "database", c.Names().Database())
	}
	m := &migrator{conn: c, ddl: ddl, log: c.Log(), lock: lock, gains: gains}
	if err := m.exec(ctx, createMigrationsTable(ddl)); err != nil {
		return fmt.Errorf("migration %s: create %s to record it: %w", v.Pending[0], migrationsTable, err)
	}
	for _, mig := range pending {
		if err := m.held(ctx); err != nil {
			return fmt.Errorf("migration %d %q: %w", mig.id, mig.name, err)
		}
		start := time.Now()
		c.Log().Info("applying migration", "migration", mig.id, "name", mig.name)
		if err := apply(ctx, m, mig); err != nil {
			return fmt.Errorf("migration %d %q: %w", mig.id, mig.name, err)
		}
		d := time.Since(start)
		if err := m.held(ctx); err != nil {
			return fmt.Errorf("migration %d %q: %w", mig.id, mig.name, err)
		}
		if err := record(ctx, c, mig, start, d); err != nil {
			return fmt.Errorf("migration %d %q: record in %s: %w", mig.id, mig.name, migrationsTable, err)
		}
		c.Log().Info("migration applied", "migration", mig.id, "name", mig.name, "duration_ms", d.Milliseconds())
	}
	return nil
}

func apply(ctx context.Context, m *migrator, mig migration) error {
	if mig.run != nil {
		return mig.run(ctx, m)
	}
	for _, q := range mig.sql(m.ddl) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// applicable returns the steps of ms that server can apply.
func applicable(ms []migration, server chconn.Server) []migration {
	out := make([]migration, 0, len(ms))
	for _, m := range ms {
		if m.requires == nil || m.requires(server) {
			out = append(out, m)
		}
	}
	return out
}

// checkTopology makes sure, before any DDL, that the cluster exists and
// that the database does not hold single-server tables under the names
// cluster mode gives its Distributed tables.
func checkTopology(ctx context.Context, c *chconn.Conn) error {
	if !c.Names().Clustered() {
		return nil
	}
	if _, err := c.ClusterHosts(ctx); err != nil {
		return err
	}
	var engine string
	err := c.QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", c.Names().Database(), schema.ProjectsTable.Name()).Scan(&engine)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("look for earlier tables: %w", err)
	case engine != "Distributed":
		return fmt.Errorf("database %q holds single-server tables (projects is %s): cluster mode keeps its rows in *_local tables behind Distributed ones; "+
			"use a new database, or move the rows with INSERT … SELECT once the cluster tables exist", c.Names().Database(), engine)
	}
	return nil
}

// record notes in schema_migrations that mig has been applied.
func record(ctx context.Context, c *chconn.Conn, mig migration, start time.Time, d time.Duration) error {
	return c.InsertRow(ctx, "INSERT INTO "+c.Names().Table(migrationsTable)+" (id, name, applied_at, duration_ms)",
		mig.id, mig.name, start.UTC(), uint64(d.Milliseconds()))
}
