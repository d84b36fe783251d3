package sink

import "fmt"

// migrations is the schema's history, oldest first: every database goes
// through these steps in order, each once (see migration for the rules a
// step follows). Append new steps; never change or remove one that has
// shipped, since databases have recorded it.
//
// The DDL uses only what ClickHouse 18.16 and current releases share: no
// DateTime64, Bool, LowCardinality, TTL or window functions.
func migrations() []migration {
	return []migration{
		// The schema of the first release, as it created it; a database
		// that release wrote is adopted by running this step, whose
		// statements all find their objects there already.
		{id: 1, name: "create tables and views", sql: func(d ddl) []string {
			stmts := []string{d.createDatabase()}
			for _, t := range []tableDef{projectsTable.def(), messagesTable.def(), snapshotsTable.def(), runsTable.def()} {
				stmts = append(stmts, d.createTable(t)...)
			}
			return append(stmts, d.createView("message_read_latest", messageReadLatest(d)), d.createView("project_read_daily", projectReadDaily(d)))
		}},
		// Rollups for the views, so that a dashboard query costs what it
		// shows rather than the passes stored; see rollups.go.
		{id: 2, name: "dashboard rollups", run: migrateRollups},
	}
}

// messageReadLatest is the query of the message_read_latest view.
//
// The views are for BI tools. They follow the rules of 18.16,
// which allows one JOIN per SELECT (hence the nesting) and
// substitutes an alias wherever its name appears in the same
// SELECT (hence last_read_count, not read_count, next to
// argMax(read_count, ...)). Snapshots are deduplicated with
// argMax over (snapshot_at, version), which avoids FINAL on the
// largest table; the small lookup tables use FINAL. IF NOT EXISTS
// keeps an existing view: changing one needs a DROP migration.
func messageReadLatest(d ddl) string {
	return fmt.Sprintf(`SELECT
    project_id,
    nft,
    project_name,
    message_id,
    subject,
    last_snapshot_at AS snapshot_at,
    last_read_count AS read_count,
    last_total AS total,
    last_percent AS percent
FROM
(
    SELECT project_id, message_id, subject, last_snapshot_at, last_read_count, last_total, last_percent
    FROM
    (
        SELECT
            project_id,
            message_id,
            max(snapshot_at) AS last_snapshot_at,
            argMax(read_count, (snapshot_at, version)) AS last_read_count,
            argMax(total, (snapshot_at, version)) AS last_total,
            argMax(percent, (snapshot_at, version)) AS last_percent
        FROM %s
        GROUP BY project_id, message_id
    )
    ANY LEFT JOIN
    (
        SELECT project_id, id AS message_id, subject%s
        FROM %s FINAL
    ) USING (project_id, message_id)
)
%s`, d.table("message_read_snapshots"), d.finalVersion(), d.table("messages"), joinProjects(d))
}

// projectReadDaily is the query of the project_read_daily view.
//
// A day is a UTC day whatever the server's time zone, like
// snapshot_at itself. Each message counts with its last snapshot
// of the day, so a project's line does not depend on how many
// passes ran that day.
func projectReadDaily(d ddl) string {
	return fmt.Sprintf(`SELECT
    day,
    project_id,
    nft,
    project_name,
    messages,
    reads,
    total,
    if(total = 0, 0, reads / total) AS read_rate
FROM
(
    SELECT day, project_id, count() AS messages, sum(day_read_count) AS reads, sum(day_total) AS total
    FROM
    (
        SELECT
            project_id,
            message_id,
            toDate(snapshot_at, 'UTC') AS day,
            argMax(read_count, (snapshot_at, version)) AS day_read_count,
            argMax(total, (snapshot_at, version)) AS day_total
        FROM %s
        GROUP BY project_id, message_id, day
    )
    GROUP BY day, project_id
)
%s`, d.table("message_read_snapshots"), joinProjects(d))
}

// joinProjects is the JOIN every view ends with: the project's nft and
// name from the projects table, by project_id. Migration 1's views are
// built with it too, so it stays as it is: a view that needs another JOIN
// writes its own.
func joinProjects(d ddl) string {
	return fmt.Sprintf(`ANY LEFT JOIN
(
    SELECT id AS project_id, nft, name AS project_name%s
    FROM %s FINAL
) USING (project_id)`, d.finalVersion(), d.table("projects"))
}
