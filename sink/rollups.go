package sink

import (
	"context"
	"fmt"
	"log/slog"
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

// orderKey orders a message's snapshot rows as argMax over
// (snapshot_at, version) does, as one String: three zero-padded decimal
// fields of 11 digits (snapshot_at in seconds, then version split at
// 10^10). ClickHouse 18.16 runs argMax with a tuple key through its generic,
// Field-copying code, which was measured twice as slow as a String key on
// the dashboards' queries. The fields stay 11 digits wide for every
// DateTime and every UInt64 (its top part is below 1.9·10^9), so comparing
// the strings compares the tuples.
const orderKey = "concat(toString(toUInt64(snapshot_at) + 10000000000), " +
	"toString(intDiv(version, 10000000000) + 10000000000), " +
	"toString(version % 10000000000 + 10000000000))"

// snapshotRow encodes a snapshot row as one String that sorts as
// orderKey: the key (33 characters), then read_count, total and the bytes
// of percent in hex (exact, unlike a decimal float), separated by commas.
// The rollups keep max of it per message, the cheapest aggregate there is:
// measured 40 ms for 100 000 messages, where argMax of each column by the
// key took 100 ms. Two rows with the same key are the same row written
// twice, so max picks what argMax would.
const snapshotRow = "concat(" + orderKey + ", toString(read_count), ',', toString(total), ',', hex(reinterpretAsString(percent)))"

// rowKeyLength is the length of orderKey's strings, where snapshotRow's
// values begin.
const rowKeyLength = 33

// rollupTable is a rollup: its DDL, and the SELECT over the snapshot
// history that fills it, used by its materialized view for new rows and by
// the fold for old ones. Columns are named apart from the snapshot
// columns: 18.16 substitutes an alias wherever its name appears in the
// same SELECT, so argMaxState(read_count, …) AS read_count would be cyclic.
type rollupTable struct {
	name    string
	columns string
	engine  string
	// fill selects from {from}, the snapshot table, with {where} a WHERE
	// clause (empty, or restricting the rows).
	fill string
}

// selectFrom returns the rollup's fill from the table from, restricted by
// the WHERE clause where.
func (r rollupTable) selectFrom(from, where string) string {
	return strings.NewReplacer("{from}", from, "{where}", where).Replace(r.fill)
}

func rollupTables() []rollupTable {
	return []rollupTable{
		{
			// One row per message: its latest snapshot.
			name: latestRollup,
			columns: `project_id Int64,
    message_id Int64,
    latest_row AggregateFunction(max, String)`,
			engine: "AggregatingMergeTree() ORDER BY (project_id, message_id)",
			fill: `SELECT project_id, message_id, maxState(` + snapshotRow + `) AS latest_row
FROM {from} {where}
GROUP BY project_id, message_id`,
		},
		{
			// One row per message and UTC day: its last snapshot of the day.
			name: dailyRollup,
			columns: `project_id Int64,
    day Date,
    message_id Int64,
    day_row AggregateFunction(max, String)`,
			engine: "AggregatingMergeTree() PARTITION BY toYYYYMM(day) ORDER BY (project_id, day, message_id)",
			fill: `SELECT project_id, toDate(snapshot_at, 'UTC') AS day, message_id, maxState(` + snapshotRow + `) AS day_row
FROM {from} {where}
GROUP BY project_id, day, message_id`,
		},
		{
			// One row per write of a project at a snapshot: readsync gives
			// every write of a project its own version, so summing the
			// rows of one (project, snapshot, version) sums one write.
			name: snapshotRollup,
			columns: `project_id Int64,
    snapshot_at DateTime,
    version UInt64,
    write_messages UInt64,
    write_reads UInt64,
    write_total UInt64`,
			engine: "SummingMergeTree() PARTITION BY toYYYYMM(snapshot_at) ORDER BY (project_id, snapshot_at, version)",
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
func views(db string) [][2]string {
	q := func(t string) string { return quoteIdent(db) + "." + quoteIdent(t) }
	projects := fmt.Sprintf(`ANY LEFT JOIN
(
    SELECT id AS project_id, nft, name AS project_name
    FROM %s FINAL
) USING (project_id)`, q("projects"))
	return [][2]string{
		{"message_read_latest", fmt.Sprintf(`CREATE VIEW %s AS
SELECT project_id, nft, project_name, message_id, subject, snapshot_at, read_count, total, percent
FROM
(
    SELECT project_id, message_id, subject, snapshot_at, read_count, total, percent
    FROM
    (
        SELECT
            project_id,
            message_id,
            toDateTime(toUInt32(toUInt64(substring(message_row, 1, 11)) - 10000000000)) AS snapshot_at,
            splitByChar(',', substring(message_row, %d)) AS message_values,
            toUInt64(message_values[1]) AS read_count,
            toUInt64(message_values[2]) AS total,
            reinterpretAsFloat64(unhex(message_values[3])) AS percent
        FROM
        (
            SELECT project_id, message_id, maxMerge(latest_row) AS message_row
            FROM %s
            GROUP BY project_id, message_id
        )
    )
    ANY LEFT JOIN
    (
        SELECT project_id, id AS message_id, subject
        FROM %s FINAL
    ) USING (project_id, message_id)
)
%s`, q("message_read_latest"), rowKeyLength+1, q(latestRollup), q("messages"), projects)},
		// A day is a UTC day whatever the server's time zone, like
		// snapshot_at itself. Each message counts with its last snapshot
		// of the day, so a project's line does not depend on how many
		// passes ran that day.
		{"project_read_daily", fmt.Sprintf(`CREATE VIEW %s AS
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
%s`, q("project_read_daily"), q(dayRollup), projects)},
		// A project's read rate at a snapshot is that of its newest write
		// for the snapshot: the highest version.
		{snapshotView, fmt.Sprintf(`CREATE VIEW %s AS
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
%s`, q(snapshotView), q(snapshotRollup), projects)},
	}
}

// migrateRollups makes the views read the rollups. When they already do,
// it does nothing. Otherwise (a new database, one written by a release
// before the rollups, or a fold that was cut off) it rebuilds the rollups
// from scratch: drops what a cut-off fold left, creates each rollup and
// its materialized view, folds the existing history into it a partition
// at a time, and only then replaces the views, so the views are the mark
// of a finished fold.
func (c *ClickHouse) migrateRollups(ctx context.Context) error {
	current, err := c.viewsCurrent(ctx)
	if err != nil || current {
		return err
	}
	log := c.logger()
	q := c.table
	for _, r := range rollupTables() {
		for _, stmt := range []string{
			"DROP TABLE IF EXISTS " + q(r.name+"_mv"),
			"DROP TABLE IF EXISTS " + q(r.name),
		} {
			if err := c.exec(ctx, stmt); err != nil {
				return err
			}
		}
	}
	for _, stmt := range []string{"DROP TABLE IF EXISTS " + q(dayRollup), fmt.Sprintf(dayRollupDDL, q(dayRollup))} {
		if err := c.exec(ctx, stmt); err != nil {
			return err
		}
	}
	// Rows the materialized views see from here on are theirs; the fold
	// takes the older ones. Only the summing rollup counts a row twice
	// if both took it, so its fold stops at the versions written before
	// its view existed.
	cutoff := uint64(time.Now().UnixNano())
	for _, r := range rollupTables() {
		if err := c.exec(ctx, fmt.Sprintf("CREATE TABLE %s (\n    %s\n) ENGINE = %s", q(r.name), r.columns, r.engine)); err != nil {
			return err
		}
		if err := c.exec(ctx, fmt.Sprintf("CREATE MATERIALIZED VIEW %s TO %s AS\n%s",
			q(r.name+"_mv"), q(r.name), r.selectFrom(q("message_read_snapshots"), ""))); err != nil {
			return err
		}
	}
	partitions, err := c.partitions(ctx, "message_read_snapshots")
	if err != nil {
		return err
	}
	if len(partitions) > 0 {
		log.Info("folding snapshot history into the rollups", "partitions", len(partitions))
	}
	for i, p := range partitions {
		start := time.Now()
		for _, r := range rollupTables() {
			where := fmt.Sprintf("WHERE toYYYYMM(snapshot_at) = %d", p)
			if r.name == snapshotRollup {
				where += fmt.Sprintf(" AND version < %d", cutoff)
			}
			if err := c.exec(ctx, fmt.Sprintf("INSERT INTO %s %s", q(r.name), r.selectFrom(q("message_read_snapshots"), where))); err != nil {
				return fmt.Errorf("fold partition %d: %w", p, err)
			}
		}
		log.Info("folded snapshot partition", "partition", p, "done", i+1, "of", len(partitions),
			"duration_ms", time.Since(start).Milliseconds())
	}
	// The day rollup last, from the daily rollup, which now holds every
	// row; a month at a time keeps the GROUP BY's memory to a month's
	// messages × days.
	months, err := c.partitions(ctx, dailyRollup)
	if err != nil {
		return err
	}
	for i, m := range months {
		start := time.Now()
		where := fmt.Sprintf("WHERE toYYYYMM(day) = %d", m)
		if err := c.exec(ctx, fmt.Sprintf(refreshDaysSQL, q(dayRollup), q(dailyRollup), where, rowKeyLength+1)); err != nil {
			return fmt.Errorf("fold month %d into %s: %w", m, dayRollup, err)
		}
		log.Info("folded project days", "month", m, "done", i+1, "of", len(months), "duration_ms", time.Since(start).Milliseconds())
	}
	for _, v := range views(c.db) {
		for _, stmt := range []string{"DROP TABLE IF EXISTS " + q(v[0]), v[1]} {
			if err := c.exec(ctx, stmt); err != nil {
				return err
			}
		}
	}
	return nil
}

// viewsCurrent reports whether every view exists and reads its rollup.
func (c *ClickHouse) viewsCurrent(ctx context.Context) (bool, error) {
	rows, err := c.conn.Query(ctx, "SELECT name, create_table_query FROM system.tables WHERE database = ?", c.db)
	if err != nil {
		return false, c.redact(fmt.Errorf("list tables of %s: %w", c.db, err))
	}
	defer rows.Close()
	ddl := map[string]string{}
	for rows.Next() {
		var name, query string
		if err := rows.Scan(&name, &query); err != nil {
			return false, c.redact(fmt.Errorf("list tables of %s: %w", c.db, err))
		}
		ddl[name] = query
	}
	if err := rows.Err(); err != nil {
		return false, c.redact(fmt.Errorf("list tables of %s: %w", c.db, err))
	}
	reads := map[string]string{"message_read_latest": latestRollup, "project_read_daily": dayRollup, snapshotView: snapshotRollup}
	for view, rollup := range reads {
		if !strings.Contains(ddl[view], rollup) {
			return false, nil
		}
	}
	for _, r := range rollupTables() {
		if ddl[r.name+"_mv"] == "" {
			return false, nil
		}
	}
	return true, nil
}

// partitions lists the partitions of a table partitioned by month
// (toYYYYMM), oldest first.
func (c *ClickHouse) partitions(ctx context.Context, table string) ([]uint32, error) {
	rows, err := c.conn.Query(ctx, `SELECT DISTINCT toUInt32(partition) AS p FROM system.parts
WHERE database = ? AND table = ? AND active ORDER BY p`, c.db, table)
	if err != nil {
		return nil, c.redact(fmt.Errorf("list partitions of %s: %w", table, err))
	}
	defer rows.Close()
	var out []uint32
	for rows.Next() {
		var p uint32
		if err := rows.Scan(&p); err != nil {
			return nil, c.redact(fmt.Errorf("list partitions of %s: %w", table, err))
		}
		out = append(out, p)
	}
	return out, c.redact(rows.Err())
}

func (c *ClickHouse) exec(ctx context.Context, stmt string) error {
	if err := c.conn.Exec(ctx, stmt); err != nil {
		head, _, _ := strings.Cut(stmt, "\n")
		return c.redact(fmt.Errorf("%s: %w", head, err))
	}
	return nil
}

func (c *ClickHouse) logger() *slog.Logger {
	if c.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.log
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
// (messages, Σ snapshot_at, Σ version / 10^10, Σ version mod 10^10): if a
// later refresh saw more, the first component that differs is larger; if it
// saw the same last snapshots, its values are the same. Each sum is padded
// to 20 digits so that the key compares as a String.
const dayRollupDDL = `CREATE TABLE %s (
    project_id Int64,
    day Date,
    day_state AggregateFunction(argMax, Tuple(UInt64, UInt64, UInt64), String)
) ENGINE = AggregatingMergeTree() PARTITION BY toYYYYMM(day) ORDER BY (project_id, day)`

// refreshDaysSQL computes the day rollup's rows from the daily rollup for
// the (project, day) pairs that %[3]s, a WHERE clause, selects.
const refreshDaysSQL = `INSERT INTO %[1]s (project_id, day, day_state)
SELECT project_id, day, argMaxState(day_values, refresh_key)
FROM
(
    SELECT
        project_id,
        day,
        (count(), sum(toUInt64(message_values[1])), sum(toUInt64(message_values[2]))) AS day_values,
        concat(
            toString(count() + 10000000000000000000),
            toString(sum(toUInt64(substring(message_row, 1, 11))) + 10000000000000000000),
            toString(sum(toUInt64(substring(message_row, 12, 11))) + 10000000000000000000),
            toString(sum(toUInt64(substring(message_row, 23, 11))) + 10000000000000000000)) AS refresh_key
    FROM
    (
        SELECT project_id, day, message_id, message_row, splitByChar(',', substring(message_row, %[4]d)) AS message_values
        FROM
        (
            SELECT project_id, day, message_id, maxMerge(day_row) AS message_row
            FROM %[2]s
            %[3]s
            GROUP BY project_id, day, message_id
        )
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
	if err := c.exec(ctx, fmt.Sprintf(refreshDaysSQL, c.table(dayRollup), c.table(dailyRollup), where, rowKeyLength+1)); err != nil {
		return fmt.Errorf("refresh %d project days of %s: %w", len(pairs), dayRollup, err)
	}
	return nil
}
