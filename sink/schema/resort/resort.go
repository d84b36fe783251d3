// Package resort moves message_read_snapshots onto its sort key
// (project_id, snapshot_at, message_id). Releases up to 0.5.0 sorted it
// by message first, so that the rows of one project snapshot, which every
// refresh reads, lay a granule per message apart; a database created since
// has the new key, and one of an earlier release is moved to it in the
// background, while passes go on writing:
//
//  1. set up: a copy of the table under the new key (schema.ResortCopy)
//     and a materialized view that copies every INSERT into the table
//     there from then on, whoever sends it (a pod of the previous release
//     during a rolling update, an import by hand);
//  2. copy: after a settle delay (Options), by which the INSERTs in flight
//     at the setup have landed, the rows the table held, a partition and a
//     range of projects at a time, each step recorded in schema.Resorts,
//     so that a kill loses one step and the next process resumes after the
//     last;
//  3. swap: the view dropped, the two tables swapped (an atomic EXCHANGE
//     where the database has it, a RENAME of both elsewhere), then the
//     rows written meanwhile copied again from what the change log says
//     was written around the setup and the swap.
//
// In cluster mode the tables that hold the rows are replicated
// <name>_local tables, which 18.16 cannot rename: their ZooKeeper path
// names them. There the copy is message_read_snapshots_resorted_local,
// behind a Distributed table of its own, and keeps that name: the swap
// renames the Distributed tables instead, once the materialized views
// that fill the rollups and the change log read the copy (18.16 can
// neither rename a materialized view nor chain one into another, so each
// is dropped and created again; a swap log, filled by a view of its own
// meanwhile, records what the old table took in between, and the finish
// copies it again).
//
// A row copied twice (by the view and by a step, or by a step run again)
// is the same row twice: ReplacingMergeTree keeps one, and every reader
// takes a snapshot's newest version. The materialized views of the
// rollups and change logs stay on the table's name: no row written through
// it misses them. The table as earlier releases sorted it is kept as
// schema.PresortSnapshots for the operator to drop. The move's tables are
// declared in package schema (resorts.go); the move takes the migration
// lock of package migrate for each of its steps.
package resort

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/schema/migrate"
)

// Names of the materialized views the move makes and drops again.
const (
	resortView  = "message_read_snapshots_resort_mv"
	swapLogView = "snapshot_resort_swaps_mv"
)

// resortKey is the snapshot table's sort key as system.tables writes it.
const resortKey = "project_id, snapshot_at, message_id"

// Options tunes the move; the zero value is the default.
type Options struct {
	// Settle is how long after the setup the copy starts: an INSERT that
	// began before the view existed goes on without it, and must have
	// landed before its rows are copied (readsync's writes give up after
	// two minutes). 5 minutes when zero.
	Settle time.Duration
	// StepRows bounds the rows one copy step writes, by the snapshot
	// rollup's count of each project's rows: 2 000 000 when zero.
	StepRows uint64
	// Lease is the migration lock's lease (see migrate.Lease): how long a
	// step waits for a process that died holding the lock before it takes
	// the lock over. migrate.DefaultLease when zero.
	Lease migrate.Lease
}

func (o Options) settle() uint32 {
	if o.Settle <= 0 {
		return 300
	}
	return uint32(max(o.Settle/time.Second, 1))
}

func (o Options) stepRows() uint64 {
	if o.StepRows == 0 {
		return 2_000_000
	}
	return o.StepRows
}

// Report says what a step of the move did.
type Report struct {
	// Done says that nothing is left to move.
	Done bool
	// Wait, when positive, is how long to wait before the next step.
	Wait time.Duration
	// Phase is what the step did: setup, copy, copied, swap, swapped, or empty
	// for none.
	Phase string
	// Partition and Rows are the partition a copy step worked on and the
	// rows it wrote.
	Partition string
	Rows      uint64
	// Left counts the partitions still to copy after the step.
	Left int
}

// Step runs one bounded step of the move of message_read_snapshots onto
// its sort key (see the package's doc), under the migration lock, and
// says what it did; a process that finds the lock held waits for its
// holder. The schema must be current.
func Step(ctx context.Context, c *chconn.Conn, opts Options) (Report, error) {
	r := resorter{c: c, d: schema.DDL{Names: c.Names()}, opts: opts}
	// Most starts find nothing to move: they say so having only read, as
	// a start with the schema current issues no DDL.
	if s, err := r.state(ctx); err != nil || s.done() {
		return Report{Done: err == nil}, c.Redact(err)
	}
	// Wait for the lock as long as ctx allows: a process that died holding
	// it leaves it to be taken over after its lease, by a waiter.
	lock, err := migrate.TakeLock(ctx, c, opts.Lease)
	if err != nil {
		return Report{}, c.Redact(err)
	}
	defer lock.Release(context.WithoutCancel(ctx))
	rep, err := r.step(ctx)
	return rep, c.Redact(err)
}

// resorter runs the move's steps on a connection.
type resorter struct {
	c    *chconn.Conn
	d    schema.DDL
	opts Options
}

// resortState is what the move finds in the database.
type resortState struct {
	key                          string // the snapshot table's sort key; empty when it is missing
	snapshots, resorted, presort bool   // which tables exist
	setupAt, swapAt, swapped     uint32 // when the phases were recorded, 0 for never
}

// done reports whether nothing is left to move: the table has the sort
// key and no swap waits to be finished, or there is no table.
func (s resortState) done() bool {
	switch {
	case !s.snapshots && s.resorted && s.presort:
		return false
	case s.key == resortKey:
		return s.swapAt == 0 || s.swapped != 0
	}
	return !s.snapshots
}

func (r resorter) state(ctx context.Context) (resortState, error) {
	var s resortState
	names := []string{schema.SnapshotsTable.Name(), schema.ResortCopy, schema.PresortSnapshots}
	if r.d.Clustered() {
		names = append(names, r.d.LocalName(schema.SnapshotsTable.Name()), r.d.LocalName(schema.ResortCopy))
	}
	q := "SELECT name, sorting_key, engine_full FROM system.tables WHERE database = ? AND has(?, name)"
	rows, err := r.c.Query(ctx, q, r.d.Database(), names)
	if err != nil {
		return s, fmt.Errorf("read the snapshot tables: %w", err)
	}
	keys, engines := map[string]string{}, map[string]string{}
	for rows.Next() {
		var name, key, engine string
		if err := rows.Scan(&name, &key, &engine); err != nil {
			rows.Close()
			return s, err
		}
		keys[name], engines[name] = key, engine
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, err
	}
	_, s.snapshots = keys[schema.SnapshotsTable.Name()]
	_, s.resorted = keys[schema.ResortCopy]
	_, s.presort = keys[schema.PresortSnapshots]
	s.key = keys[schema.SnapshotsTable.Name()]
	if r.d.Clustered() {
		// The key is the local table's that the Distributed one reads.
		local := r.d.LocalName(schema.SnapshotsTable.Name())
		if strings.Contains(engines[schema.SnapshotsTable.Name()], r.d.LocalName(schema.ResortCopy)) {
			local = r.d.LocalName(schema.ResortCopy)
		}
		s.key = keys[local]
	}
	q = "SELECT toUInt32(minIf(at, phase = 'setup')), toUInt32(minIf(at, phase = 'swap')), toUInt32(maxIf(at, phase = 'swapped')) FROM " + r.d.Table(schema.Resorts)
	if err := r.c.QueryRow(ctx, q).Scan(&s.setupAt, &s.swapAt, &s.swapped); err != nil {
		return s, fmt.Errorf("read %s: %w", schema.Resorts, err)
	}
	return s, nil
}

func (r resorter) step(ctx context.Context) (Report, error) {
	s, err := r.state(ctx)
	if err != nil {
		return Report{}, err
	}
	switch {
	case !s.snapshots && s.resorted && s.presort:
		// Killed between the two renames of a swap: finish it.
		if err := r.exec(ctx, fmt.Sprintf("RENAME TABLE %s TO %s%s", r.d.Table(schema.ResortCopy), r.d.Table(schema.SnapshotsTable.Name()), r.d.OnCluster())); err != nil {
			return Report{}, err
		}
		return r.swapped(), nil
	case s.key == resortKey && s.swapAt != 0 && s.swapped == 0:
		// Swapped, not yet finished: once the INSERTs that began before
		// the swap have landed in the old table.
		now, err := r.now(ctx)
		if err != nil {
			return Report{}, err
		}
		if start := s.swapAt + r.opts.settle(); now < start {
			return Report{Wait: time.Duration(start-now) * time.Second}, nil
		}
		return r.finish(ctx, s)
	case s.done():
		return Report{Done: true}, nil
	case !s.resorted || s.setupAt == 0:
		// Set up, or set up again what a process killed in the middle
		// of it left: every statement finds what it created.
		return r.setup(ctx)
	}
	now, err := r.now(ctx)
	if err != nil {
		return Report{}, err
	}
	if start := s.setupAt + r.opts.settle(); now < start {
		return Report{Wait: time.Duration(start-now) * time.Second}, nil
	}
	left, err := r.partitionsLeft(ctx)
	if err != nil {
		return Report{}, err
	}
	if len(left) > 0 {
		return r.copy(ctx, left)
	}
	return r.swap(ctx)
}

// exec runs a statement that changes the schema.
func (r resorter) exec(ctx context.Context, q string) error {
	if err := migrate.ExecDDL(ctx, r.c, q); err != nil {
		return fmt.Errorf("move %s to its sort key: %s: %w", schema.SnapshotsTable.Name(), strings.SplitN(q, "\n", 2)[0], err)
	}
	return nil
}

func (r resorter) now(ctx context.Context) (uint32, error) {
	var now uint32
	if err := r.c.QueryRow(ctx, "SELECT toUInt32(now())").Scan(&now); err != nil {
		return 0, fmt.Errorf("read the server's time: %w", err)
	}
	return now, nil
}

// record records a step.
func (r resorter) record(ctx context.Context, phase, partition string, lastProject int64, rows uint64) error {
	q := "INSERT INTO " + r.d.Table(schema.Resorts) + " (at, phase, partition, last_project, rows) SELECT now(), ?, ?, ?, ?"
	if err := r.c.Exec(r.c.SyncInserts(ctx), q, phase, partition, lastProject, rows); err != nil {
		return fmt.Errorf("record the move's %s step in %s: %w", phase, schema.Resorts, err)
	}
	return nil
}

// setup checks that the server has room for a copy of the table, then
// creates the copy and the view that copies new rows there.
func (r resorter) setup(ctx context.Context) (Report, error) {
	if err := r.checkRoom(ctx); err != nil {
		return Report{}, err
	}
	for _, q := range schema.ResortCopyDDL(r.d) {
		if err := r.exec(ctx, q); err != nil {
			return Report{}, err
		}
	}
	server, err := r.c.Server(ctx)
	if err != nil {
		return Report{}, err
	}
	if server.DedupTokens() {
		// As migration 4 set it on the table the copy replaces.
		q := fmt.Sprintf("ALTER TABLE %s%s MODIFY SETTING %s = %d", r.d.Local(schema.ResortCopy), r.d.OnCluster(), chconn.SettingDedupWindow, migrate.DedupWindow)
		if err := r.exec(ctx, q); err != nil {
			return Report{}, err
		}
	}
	if server.Codecs() {
		// As migration 13 set them on the table the copy replaces.
		for _, q := range schema.CodecDDL(r.d, r.d.Local(schema.ResortCopy)) {
			if err := r.exec(ctx, q); err != nil {
				return Report{}, err
			}
		}
	}
	cols := schema.SnapshotsTable.ColumnList()
	// In cluster mode each host's view copies the rows its local table
	// takes into its local copy, which replicates them.
	q := fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS\nSELECT %s FROM %s",
		r.d.Table(resortView), r.d.OnCluster(), r.d.Local(schema.ResortCopy), cols, r.d.Local(schema.SnapshotsTable.Name()))
	if err := r.exec(ctx, q); err != nil {
		return Report{}, err
	}
	if err := r.record(ctx, "setup", "", 0, 0); err != nil {
		return Report{}, err
	}
	return Report{Phase: "setup", Wait: time.Duration(r.opts.settle()) * time.Second}, nil
}

// checkRoom refuses the move when the server's disk has no room for a
// second copy of the table, where the server says how much it has
// (system.disks; 18.16 has no such table, and the move goes on).
func (r resorter) checkRoom(ctx context.Context) error {
	var need uint64
	// In cluster mode, what this host holds of it: a shard's share.
	q := "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = ? AND table = ?"
	local := r.d.LocalName(schema.SnapshotsTable.Name())
	if err := r.c.QueryRow(ctx, q, r.d.Database(), local).Scan(&need); err != nil {
		// 18.16 names the column bytes.
		if err := r.c.QueryRow(ctx, strings.Replace(q, "bytes_on_disk", "bytes", 1), r.d.Database(), local).Scan(&need); err != nil {
			return fmt.Errorf("move %s to its sort key: read its size: %w", schema.SnapshotsTable.Name(), err)
		}
	}
	has, err := chconn.QueryColumn[string](ctx, r.c, "SELECT name FROM system.tables WHERE database = 'system' AND name = 'disks'")
	if err != nil || len(has) == 0 {
		r.c.Log().Warn("moving message_read_snapshots to its sort key without knowing the server's free disk: it needs room for a second copy",
			"need_bytes", need)
		return err
	}
	var free uint64
	if err := r.c.QueryRow(ctx, "SELECT min(free_space) FROM system.disks").Scan(&free); err != nil {
		return fmt.Errorf("move %s to its sort key: read the server's free disk: %w", schema.SnapshotsTable.Name(), err)
	}
	// The copy, and a tenth more for its merges.
	if want := need + need/10; free < want {
		return fmt.Errorf("move %s to its sort key: the server's disk has %d bytes free, and a second copy of the table needs %d (its %d bytes and a tenth for merges): free room, or keep the old sort key for now", schema.SnapshotsTable.Name(), free, want, need)
	}
	return nil
}

// partitionsLeft lists the table's partitions no step has finished
// copying, in order.
func (r resorter) partitionsLeft(ctx context.Context) ([]string, error) {
	q := "SELECT DISTINCT partition FROM system.parts WHERE active AND database = ? AND table = ? ORDER BY partition"
	args := []any{r.d.Database(), schema.SnapshotsTable.Name()}
	if r.d.Clustered() {
		// A host's parts are its shard's: the snapshot rollup has a row
		// per project snapshot of every shard.
		q, args = "SELECT DISTINCT toString(toYYYYMM(snapshot_at)) AS partition FROM "+r.d.Table(schema.SnapshotRollup)+" ORDER BY partition", nil
	}
	all, err := chconn.QueryColumn[string](ctx, r.c, q, args...)
	if err != nil {
		return nil, fmt.Errorf("move %s to its sort key: its partitions: %w", schema.SnapshotsTable.Name(), err)
	}
	done, err := chconn.QueryColumn[string](ctx, r.c, "SELECT DISTINCT partition FROM "+r.d.Table(schema.Resorts)+" WHERE phase = 'copied'")
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", schema.Resorts, err)
	}
	var left []string
	for _, p := range all {
		if !slices.Contains(done, p) {
			left = append(left, p)
		}
	}
	return left, nil
}

// copy copies the next range of projects of the first partition left:
// the projects after the last one a step recorded, up to
// Options.StepRows rows by the snapshot rollup's count, or all that
// remain.
func (r resorter) copy(ctx context.Context, left []string) (Report, error) {
	p := left[0]
	var last int64
	q := "SELECT max(last_project), count() FROM " + r.d.Table(schema.Resorts) + " WHERE phase = 'copy' AND partition = ?"
	var steps uint64
	if err := r.c.QueryRow(ctx, q, p).Scan(&last, &steps); err != nil {
		return Report{}, fmt.Errorf("read %s: %w", schema.Resorts, err)
	}
	if steps == 0 {
		last = math.MinInt64
	}
	yyyymm, err := strconv.ParseUint(p, 10, 32)
	if err != nil {
		return Report{}, fmt.Errorf("move %s to its sort key: partition %q is not a month: %w", schema.SnapshotsTable.Name(), p, err)
	}
	month := fmt.Sprintf("toYYYYMM(snapshot_at) = %d", yyyymm)
	counts := fmt.Sprintf("SELECT project_id, sum(write_messages) FROM %s WHERE %s AND project_id > %d GROUP BY project_id ORDER BY project_id",
		r.d.Table(schema.SnapshotRollup), month, last)
	end, final := last, true
	var n uint64
	rows, err := r.c.Query(ctx, counts)
	if err != nil {
		return Report{}, fmt.Errorf("move %s to its sort key: count partition %s's rows: %w", schema.SnapshotsTable.Name(), p, err)
	}
	for rows.Next() {
		var (
			project int64
			c       uint64
		)
		if err := rows.Scan(&project, &c); err != nil {
			rows.Close()
			return Report{}, err
		}
		if n > 0 && n+c > r.opts.stepRows() {
			final = false
			break
		}
		end, n = project, n+c
	}
	rows.Close()
	where := fmt.Sprintf("%s AND project_id > %d", month, last)
	if !final {
		where += fmt.Sprintf(" AND project_id <= %d", end)
	}
	cols := schema.SnapshotsTable.ColumnList()
	insert := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s", r.d.Table(schema.ResortCopy), cols, cols, r.d.Table(schema.SnapshotsTable.Name()), where)
	if err := r.c.Exec(r.c.SyncInserts(ctx), insert); err != nil {
		return Report{}, fmt.Errorf("move %s to its sort key: copy partition %s: %w", schema.SnapshotsTable.Name(), p, err)
	}
	phase := "copy"
	if final {
		phase = "copied"
	}
	if err := r.record(ctx, phase, p, end, n); err != nil {
		return Report{}, err
	}
	rep := Report{Phase: phase, Partition: p, Rows: n, Left: len(left)}
	if final {
		rep.Left--
	}
	return rep, nil
}

// swap drops the view, swaps the tables and copies again what was written
// around the setup and the swap.
func (r resorter) swap(ctx context.Context) (Report, error) {
	if err := r.record(ctx, "swap", "", 0, 0); err != nil {
		return Report{}, err
	}
	if r.d.Clustered() {
		return r.swapDistributed(ctx)
	}
	if err := r.exec(ctx, "DROP TABLE IF EXISTS "+r.d.Table(resortView)); err != nil {
		return Report{}, err
	}
	var engine string
	if err := r.c.QueryRow(ctx, "SELECT engine FROM system.databases WHERE name = ?", r.d.Database()).Scan(&engine); err != nil {
		return Report{}, fmt.Errorf("read the database's engine: %w", err)
	}
	snapshots, resorted, presort := r.d.Table(schema.SnapshotsTable.Name()), r.d.Table(schema.ResortCopy), r.d.Table(schema.PresortSnapshots)
	stmts := []string{fmt.Sprintf("RENAME TABLE %s TO %s, %s TO %s", snapshots, presort, resorted, snapshots)}
	if engine == "Atomic" || engine == "Replicated" {
		// One statement that swaps both: no moment without the table.
		stmts = []string{fmt.Sprintf("EXCHANGE TABLES %s AND %s", snapshots, resorted), fmt.Sprintf("RENAME TABLE %s TO %s", resorted, presort)}
	}
	for _, q := range stmts {
		if err := r.exec(ctx, q); err != nil {
			return Report{}, err
		}
	}
	return r.swapped(), nil
}

// swapped is what the swap step reports: the finish waits as long as the
// setup's copy did, for an INSERT that named the old table before the
// swap (a pod of the previous release prepares its INSERT, then sends its
// rows) to land there, where the finish finds it.
func (r resorter) swapped() Report {
	return Report{Phase: "swap", Wait: time.Duration(r.opts.settle()) * time.Second}
}

// swapDistributed is the swap in cluster mode (see the package's doc):
// the swap log and its view on the old local table, each view of
// schema.SnapshotViews made again on the copy, then the Distributed
// tables renamed. Run again after a kill, each statement finds what it
// made or makes it again.
func (r resorter) swapDistributed(ctx context.Context) (Report, error) {
	stmts := schema.SwapLogDDL(r.d)
	stmts = append(stmts, fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS\nSELECT project_id, snapshot_at FROM %s",
		r.d.Table(swapLogView), r.d.OnCluster(), r.d.Local(schema.SwapLog), r.d.Local(schema.SnapshotsTable.Name())))
	for _, v := range schema.SnapshotViews() {
		mv := r.d.Table(v + "_mv")
		stmts = append(stmts, "DROP TABLE IF EXISTS "+mv+r.d.OnCluster(),
			fmt.Sprintf("CREATE MATERIALIZED VIEW %s%s TO %s AS\n%s", mv, r.d.OnCluster(), r.d.Local(v), schema.FillSelect(v, r.d.Local(schema.ResortCopy), "")))
	}
	snapshots, resorted, presort := r.d.Table(schema.SnapshotsTable.Name()), r.d.Table(schema.ResortCopy), r.d.Table(schema.PresortSnapshots)
	stmts = append(stmts, fmt.Sprintf("RENAME TABLE %s TO %s, %s TO %s%s", snapshots, presort, resorted, snapshots, r.d.OnCluster()))
	for _, q := range stmts {
		if err := r.exec(ctx, q); err != nil {
			return Report{}, err
		}
	}
	return r.swapped(), nil
}

// finish copies into the moved table, from the table it replaced, the
// project snapshots the change log records as written around the setup
// (INSERTs that began before the view existed) and since the swap
// started (between the view's drop and the swap), then records the move
// done.
func (r resorter) finish(ctx context.Context, s resortState) (Report, error) {
	const margin = 60
	in := "IN"
	if r.d.Clustered() {
		// The old table takes no more rows once the Distributed tables
		// are renamed.
		for _, v := range []string{resortView, swapLogView} {
			if err := r.exec(ctx, "DROP TABLE IF EXISTS "+r.d.Table(v)+r.d.OnCluster()); err != nil {
				return Report{}, err
			}
		}
		in = "GLOBAL IN" // the subqueries read Distributed tables
	}
	cols := schema.SnapshotsTable.ColumnList()
	changed := []string{fmt.Sprintf("SELECT project_id, snapshot_at FROM %s WHERE (changed_at >= %s AND changed_at <= %s) OR changed_at >= %s",
		r.d.Table(schema.SnapshotChanges), chconn.DateTime(s.setupAt-min(s.setupAt, margin)), chconn.DateTime(s.setupAt+r.opts.settle()),
		chconn.DateTime(s.swapAt-min(s.swapAt, margin)))}
	logged, err := chconn.QueryColumn[string](ctx, r.c, "SELECT name FROM system.tables WHERE database = ? AND name = ?", r.d.Database(), schema.SwapLog)
	if err != nil {
		return Report{}, fmt.Errorf("move %s to its sort key: find the swap log: %w", schema.SnapshotsTable.Name(), err)
	}
	if len(logged) > 0 {
		changed = append(changed, "SELECT project_id, snapshot_at FROM "+r.d.Table(schema.SwapLog))
	}
	for _, c := range changed {
		q := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE (project_id, snapshot_at) %s (%s)",
			r.d.Table(schema.SnapshotsTable.Name()), cols, cols, r.d.Table(schema.PresortSnapshots), in, c)
		if err := r.c.Exec(r.c.SyncInserts(ctx), q); err != nil {
			return Report{}, fmt.Errorf("move %s to its sort key: copy the rows written during the swap: %w", schema.SnapshotsTable.Name(), err)
		}
	}
	if r.d.Clustered() {
		for _, t := range []string{r.d.Table(schema.SwapLog), r.d.Local(schema.SwapLog)} {
			if err := r.exec(ctx, "DROP TABLE IF EXISTS "+t+r.d.OnCluster()); err != nil {
				return Report{}, err
			}
		}
	}
	if err := r.record(ctx, "swapped", "", 0, 0); err != nil {
		return Report{}, err
	}
	r.c.Log().Info("message_read_snapshots moved to its sort key; the table as earlier releases sorted it is kept: drop it once you no longer need a way back",
		"kept", schema.PresortSnapshots)
	return Report{Done: true, Phase: "swapped"}, nil
}
