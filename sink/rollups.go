package sink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The rollups the dashboard views read instead of aggregating the whole
// snapshot history at every query. Materialized views fill them from every
// INSERT into message_read_snapshots; the fold in migrateRollups fills them
// from the history written before they existed.
const (
	latestRollup   = "message_read_latest_rollup"
	dailyRollup    = "message_read_daily_rollup"
	snapshotRollup = "project_read_snapshot_rollup"
	dayRollup      = "project_read_day_rollup"
	// snapshotView is the view of read rate per project at each snapshot.
	snapshotView = "project_read_snapshots"
)

// bigEndian writes the UInt64 expression x as 8 bytes, most significant
// first, so that comparing two such strings compares the numbers.
// reinterpretAsString gives the bytes least significant first and drops
// the trailing zero bytes; reversed and left-padded with zero bytes, they
// are x's fixed-width big-endian form.
func bigEndian(x string) string {
	return fmt.Sprintf("substring(concat('\\0\\0\\0\\0\\0\\0\\0\\0', reverse(reinterpretAsString(%[1]s))), length(reinterpretAsString(%[1]s)) + 1, 8)", x)
}

// rowUInt64 reads back the UInt64 that bigEndian wrote at position pos
// (1-based) of the string r.
func rowUInt64(r string, pos int) string {
	return fmt.Sprintf("reinterpretAsUInt64(reverse(substring(%s, %d, 8)))", r, pos)
}

// snapshotRow encodes a snapshot row as one String that sorts as argMax
// over (snapshot_at, version) orders rows: snapshot_at and version in
// bigEndian form, then read_count and total the same way, then the bytes
// of percent. The rollups keep max of it per message, the cheapest
// aggregate there is. Measured on 100 000 messages, merging it takes
// 30 ms, where argMax of each column by a (snapshot_at, version) tuple took
// 180 ms (18.16 runs argMax with a tuple key through generic, copying
// code) and the same row in decimal digits 70 ms. Two rows with the same
// key are the same row written twice, so max picks what argMax would.
// percent comes last because reinterpretAsString drops its trailing zero
// bytes; reinterpretAsFloat64 pads them back, exactly.
var snapshotRow = "concat(" + bigEndian("toUInt64(toUInt32(snapshot_at))") + ", " + bigEndian("version") + ", " +
	bigEndian("read_count") + ", " + bigEndian("total") + ", reinterpretAsString(percent))"

// Where snapshotRow's fields begin.
const (
	rowSnapshotAt = 1
	rowVersion    = 9
	rowReadCount  = 17
	rowTotal      = 25
	rowPercent    = 33
)

// rollupTable is a rollup: its table, and the SELECT over the snapshot
// history that fills it, used by its materialized view for new rows and by
// the fold for old ones. Columns are named apart from the snapshot
// columns: 18.16 substitutes an alias wherever its name appears in the
// same SELECT, so max(…) AS latest would be cyclic next to a column latest.
type rollupTable struct {
	tableDef
	// fill selects from {from}, the snapshot table, with {where} a WHERE
	// clause (empty, or restricting the rows).
	fill string
}

// selectFrom returns the rollup's fill from the table from, restricted by
// the WHERE clause where.
func (r rollupTable) selectFrom(from, where string) string {
	return strings.NewReplacer("{from}", from, "{where}", where).Replace(r.fill)
}

// rollupLayout stores a rollup like the snapshot table it derives from:
// in cluster mode, replicated, and sharded by project so that a project's
// rollup rows sit on the shard of its snapshots.
func rollupLayout(e engine, partitionBy, orderBy string) layout {
	return layout{engine: e, partitionBy: partitionBy, orderBy: orderBy, shardBy: "project_id"}
}

func rollupTables() []rollupTable {
	return []rollupTable{
		{
			// One row per message: its latest snapshot.
			tableDef: tableDef{name: latestRollup, columns: []columnDef{
				{"project_id", "Int64"}, {"message_id", "Int64"}, {"latest_row", "AggregateFunction(max, String)"},
			}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "", "(project_id, message_id)")},
			fill: `SELECT project_id, message_id, maxState(` + snapshotRow + `) AS latest_row
FROM {from} {where}
GROUP BY project_id, message_id`,
		},
		{
			// One row per message and UTC day: its last snapshot of the day.
			tableDef: tableDef{name: dailyRollup, columns: []columnDef{
				{"project_id", "Int64"}, {"day", "Date"}, {"message_id", "Int64"}, {"day_row", "AggregateFunction(max, String)"},
			}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "toYYYYMM(day)", "(project_id, day, message_id)")},
			fill: `SELECT project_id, toDate(snapshot_at, 'UTC') AS day, message_id, maxState(` + snapshotRow + `) AS day_row
FROM {from} {where}
GROUP BY project_id, day, message_id`,
		},
		{
			// One row per write of a project at a snapshot: readsync gives
			// every write of a project its own version, so summing the
			// rows of one (project, snapshot, version) sums one write.
			tableDef: tableDef{name: snapshotRollup, columns: []columnDef{
				{"project_id", "Int64"}, {"snapshot_at", "DateTime"}, {"version", "UInt64"},
				{"write_messages", "UInt64"}, {"write_reads", "UInt64"}, {"write_total", "UInt64"},
			}, layout: rollupLayout(engine{name: "SummingMergeTree"}, "toYYYYMM(snapshot_at)", "(project_id, snapshot_at, version)")},
			fill: `SELECT
    project_id,
    snapshot_at,
    version,
    count() AS write_messages,
    sum(read_count) AS write_reads,
    sum(total) AS write_total
FROM {from} {where}
GROUP BY project_id, snapshot_at, version`,
		},
	}
}

// views returns the dashboard views over the rollups, each as its name and
// CREATE statement. They follow the rules of 18.16, which allows one JOIN
// per SELECT (hence the nesting) and substitutes an alias wherever its name
// appears in the same SELECT (hence the rollups' own column names). The
// small lookup tables use FINAL.
func views(d ddl) [][2]string {
	q := d.table
	projects := joinProjects(d)
	return [][2]string{
		{"message_read_latest", fmt.Sprintf(`CREATE VIEW %s%s AS
SELECT project_id, nft, project_name, message_id, subject, snapshot_at, read_count, total, percent
FROM
(
    SELECT project_id, message_id, subject, snapshot_at, read_count, total, percent
    FROM
    (
        SELECT
            project_id,
            message_id,
            toDateTime(toUInt32(%s)) AS snapshot_at,
            %s AS read_count,
            %s AS total,
            reinterpretAsFloat64(substring(message_row, %d)) AS percent
        FROM
        (
            SELECT project_id, message_id, maxMerge(latest_row) AS message_row
            FROM %s
            GROUP BY project_id, message_id
        )
    )
    ANY LEFT JOIN
    (
        SELECT project_id, id AS message_id, subject%s
        FROM %s FINAL
    ) USING (project_id, message_id)
)
%s`, q("message_read_latest"), d.onCluster(), rowUInt64("message_row", rowSnapshotAt), rowUInt64("message_row", rowReadCount), rowUInt64("message_row", rowTotal), rowPercent, q(latestRollup), d.finalVersion(), q("messages"), projects)},
		// A day is a UTC day whatever the server's time zone, like
		// snapshot_at itself. Each message counts with its last snapshot
		// of the day, so a project's line does not depend on how many
		// passes ran that day.
		{"project_read_daily", fmt.Sprintf(`CREATE VIEW %s%s AS
SELECT day, project_id, nft, project_name, messages, reads, total, if(total = 0, 0, reads / total) AS read_rate
FROM
(
    SELECT day, project_id, tupleElement(day_values, 1) AS messages, tupleElement(day_values, 2) AS reads,
        tupleElement(day_values, 3) AS total
    FROM
    (
        SELECT project_id, day, argMaxMerge(day_state) AS day_values
        FROM %s
        GROUP BY project_id, day
    )
)
%s`, q("project_read_daily"), d.onCluster(), q(dayRollup), projects)},
		// A project's read rate at a snapshot is that of its newest write
		// for the snapshot: the highest version.
		{snapshotView, fmt.Sprintf(`CREATE VIEW %s%s AS
SELECT snapshot_at, project_id, nft, project_name, messages, reads, total, if(total = 0, 0, reads / total) AS read_rate
FROM
(
    SELECT
        project_id,
        snapshot_at,
        argMax(write_messages, version) AS messages,
        argMax(write_reads, version) AS reads,
        argMax(write_total, version) AS total
    FROM
    (
        SELECT project_id, snapshot_at, version, sum(write_messages) AS write_messages,
            sum(write_reads) AS write_reads, sum(write_total) AS write_total
        FROM %s
        GROUP BY project_id, snapshot_at, version
    )
    GROUP BY project_id, snapshot_at
)
%s`, q(snapshotView), d.onCluster(), q(snapshotRollup), projects)},
	}
}

// migrateRollups is the migration that makes the views read the rollups.
// It creates each rollup and its materialized view, folds the existing
// history into them a partition at a time, and only then replaces the
// views, so the old views answer until the fold is done.
//
// Like every step it may run again after a crash, or beside itself in
// another process: everything is created IF NOT EXISTS, and folding a
// partition again changes nothing in the rollups that keep a maximum. The
// summing rollup would count a partition twice, so each partition folded
// into it is marked in foldsTable and not folded again. (Two processes
// folding the same partition at the same moment would both sum it: the
// README says to run the upgrade once.)
//
// In cluster mode each rollup is a replicated <rollup>_local on every host
// with a Distributed table over it, sharded by project like the snapshots;
// each host's materialized view reads its own message_read_snapshots_local
// and writes its own rollup's local table, whose replication brings the
// rows to the shard's other replicas. The fold reads and writes through
// the Distributed tables.
func migrateRollups(ctx context.Context, m *migrator) error {
	d := m.ddl
	rollups := rollupTables()
	var stmts []string
	for _, t := range []tableDef{rollups[0].tableDef, rollups[1].tableDef, rollups[2].tableDef, dayRollupTable, foldsTable} {
		stmts = append(stmts, d.createTable(t)...)
	}
	for _, q := range stmts {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	// The materialized views take the rows written from their creation
	// on, the fold the older ones; the summing rollup would count a row
	// that both took twice, so its fold stops at the versions written
	// before its view existed: the cutoff, taken before the views are
	// created and kept for a later run of this step.
	cutoff, err := foldCutoff(ctx, m)
	if err != nil {
		return err
	}
	for _, r := range rollups {
		if err := m.exec(ctx, fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS\n%s",
			d.table(r.name+"_mv"), d.onCluster(), d.local(r.name), r.selectFrom(d.local("message_read_snapshots"), ""))); err != nil {
			return err
		}
	}
	folded, err := queryColumn[string](ctx, m.conn, "SELECT DISTINCT partition FROM "+d.table(foldsTable.name)+" WHERE partition != ''")
	if err != nil {
		return fmt.Errorf("read %s: %w", foldsTable.name, err)
	}

	partitions, err := m.partitions(ctx, "message_read_snapshots")
	if err != nil {
		return err
	}
	if len(partitions) > 0 {
		m.log.Info("folding snapshot history into the rollups", "partitions", len(partitions))
	}
	for i, p := range partitions {
		start := time.Now()
		for _, r := range rollups {
			where := "WHERE toYYYYMM(snapshot_at) = " + p
			if r.name == snapshotRollup {
				if slices.Contains(folded, p) {
					continue
				}
				where += fmt.Sprintf(" AND version < %d", cutoff)
			}
			if err := m.exec(ctx, fmt.Sprintf("INSERT INTO %s %s", d.table(r.name), r.selectFrom(d.table("message_read_snapshots"), where))); err != nil {
				return fmt.Errorf("fold partition %s into %s: %w", p, r.name, err)
			}
		}
		if err := m.exec(ctx, fmt.Sprintf("INSERT INTO %s (partition, cutoff) SELECT %s, %d", d.table(foldsTable.name), quoteString(p), cutoff)); err != nil {
			return fmt.Errorf("mark partition %s folded: %w", p, err)
		}
		m.log.Info("folded snapshot partition", "partition", p, "done", i+1, "of", len(partitions),
			"duration_ms", time.Since(start).Milliseconds())
	}
	// The day rollup last, from the daily rollup, which now holds every
	// row; a month at a time bounds the GROUP BY's memory by a month's
	// messages × days.
	months, err := m.partitions(ctx, dailyRollup)
	if err != nil {
		return err
	}
	for i, month := range months {
		start := time.Now()
		if err := m.exec(ctx, refreshDays(d, "WHERE toYYYYMM(day) = "+month)); err != nil {
			return fmt.Errorf("fold month %s into %s: %w", month, dayRollup, err)
		}
		m.log.Info("folded project days", "month", month, "done", i+1, "of", len(months), "duration_ms", time.Since(start).Milliseconds())
	}
	// A view another process replaced already is replaced again, with
	// the same definition.
	for _, v := range views(d) {
		for _, q := range []string{"DROP TABLE IF EXISTS " + d.table(v[0]) + d.onCluster(), v[1]} {
			if err := m.exec(ctx, q); err != nil {
				return err
			}
		}
	}
	return nil
}

// foldsTable records the partitions of message_read_snapshots folded into
// the summing rollup, which must not fold one twice, and in a row with an
// empty partition the fold's cutoff version.
var foldsTable = tableDef{name: "project_read_snapshot_rollup_folds", columns: []columnDef{{"partition", "String"}, {"cutoff", "UInt64"}},
	layout: layout{engine: engine{name: "ReplacingMergeTree"}, orderBy: "partition", shardBy: "partition"}}

// foldCutoff returns the version below which the fold sums snapshot rows
// into the summing rollup: now, in nanoseconds like readsync's versions,
// when the rollup's materialized view does not exist yet; otherwise the
// cutoff an earlier run took before it created the view.
func foldCutoff(ctx context.Context, m *migrator) (uint64, error) {
	n, err := queryColumn[uint64](ctx, m.conn, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", m.ddl.db, snapshotRollup+"_mv")
	if err != nil {
		return 0, fmt.Errorf("look for %s_mv: %w", snapshotRollup, err)
	}
	if n[0] > 0 {
		c, err := queryColumn[uint64](ctx, m.conn, "SELECT max(cutoff) FROM "+m.ddl.table(foldsTable.name)+" WHERE partition = ''")
		if err != nil {
			return 0, fmt.Errorf("read the fold's cutoff: %w", err)
		}
		return c[0], nil
	}
	cutoff := uint64(time.Now().UnixNano())
	if err := m.exec(ctx, fmt.Sprintf("INSERT INTO %s (partition, cutoff) SELECT '', %d", m.ddl.table(foldsTable.name), cutoff)); err != nil {
		return 0, fmt.Errorf("record the fold's cutoff: %w", err)
	}
	return cutoff, nil
}

// The day rollup holds one row per project and UTC day once merged: the
// values project_read_daily shows, computed from the daily rollup by
// refreshDays after every write. A materialized view cannot keep it: a
// day's value depends on rows written before the INSERT it sees.
//
// Each refresh stores its values with a key that grows with the rows the
// refresh saw, and the view keeps the values of the highest key, so
// refreshes may land in any order. For the set of messages of the day and
// each one's last (snapshot_at, version) of the day, more rows can only add
// messages or move a message's last snapshot later, so the key is the tuple
// (messages, Σ snapshot_at, Σ version / 2^32, Σ version mod 2^32): if a
// later refresh saw more, the first component that differs is larger; if it
// saw the same last snapshots, its values are the same. Each sum is padded
// to 20 digits so that the key compares as a String.
var dayRollupTable = tableDef{name: dayRollup, columns: []columnDef{
	{"project_id", "Int64"}, {"day", "Date"}, {"day_state", "AggregateFunction(argMax, Tuple(UInt64, UInt64, UInt64), String)"},
}, layout: rollupLayout(engine{name: "AggregatingMergeTree"}, "toYYYYMM(day)", "(project_id, day)")}

// refreshDays returns the INSERT that computes the day rollup's rows from
// the daily rollup for the (project, day) pairs that where selects.
func refreshDays(d ddl, where string) string {
	return fmt.Sprintf(refreshDaysSQL, d.table(dayRollup), d.table(dailyRollup), where,
		rowUInt64("message_row", rowReadCount), rowUInt64("message_row", rowTotal),
		rowUInt64("message_row", rowSnapshotAt), rowUInt64("message_row", rowVersion))
}

const refreshDaysSQL = `INSERT INTO %[1]s (project_id, day, day_state)
SELECT project_id, day, argMaxState(day_values, refresh_key)
FROM
(
    SELECT
        project_id,
        day,
        (count(), sum(%[4]s), sum(%[5]s)) AS day_values,
        concat(
            toString(count() + 10000000000000000000),
            toString(sum(%[6]s) + 10000000000000000000),
            toString(sum(intDiv(%[7]s, 4294967296)) + 10000000000000000000),
            toString(sum(%[7]s %% 4294967296) + 10000000000000000000)) AS refresh_key
    FROM
    (
        SELECT project_id, day, message_id, maxMerge(day_row) AS message_row
        FROM %[2]s
        %[3]s
        GROUP BY project_id, day, message_id
    )
    GROUP BY project_id, day
)
GROUP BY project_id, day`

// refreshDays recomputes the day rollup for the project days of snaps,
// which were just written.
func (c *ClickHouse) refreshDays(ctx context.Context, snaps []Snapshot) error {
	type projectDay struct {
		project int64
		day     string
	}
	seen := map[projectDay]bool{}
	var pairs, projects []string
	projectSeen := map[int64]bool{}
	for i := range snaps {
		pd := projectDay{snaps[i].ProjectID, snaps[i].SnapshotAt.Time().UTC().Format(time.DateOnly)}
		if seen[pd] {
			continue
		}
		seen[pd] = true
		pairs = append(pairs, fmt.Sprintf("(%d, '%s')", pd.project, pd.day))
		if !projectSeen[pd.project] {
			projectSeen[pd.project] = true
			projects = append(projects, fmt.Sprint(pd.project))
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	// project_id IN (…) lets the daily rollup's primary key narrow the
	// read; the pairs make it exact.
	where := fmt.Sprintf("WHERE project_id IN (%s) AND (project_id, day) IN (%s)", strings.Join(projects, ", "), strings.Join(pairs, ", "))
	if err := c.conn.Exec(c.syncInserts(ctx), refreshDays(c.ddl, where)); err != nil {
		return c.redact(fmt.Errorf("refresh %d project days of %s: %w", len(pairs), dayRollup, err))
	}
	return nil
}
