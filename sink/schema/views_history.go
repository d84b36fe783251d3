package schema

import "fmt"

// The first generation of the views, as migration 1 creates them: each
// aggregates the whole snapshot history at every query. Migration 2
// replaces them with the views over the rollups (views_rollups.go).

// MessageReadLatestV1 is the query of message_read_latest as migration 1
// creates it: argMax over (snapshot_at, version) of the whole history.
// Migration 2 replaces it with latestFromRollup.
func MessageReadLatestV1(d DDL) string {
	latest := fmt.Sprintf(`SELECT
    project_id,
    message_id,
    max(snapshot_at) AS last_snapshot_at,
    argMax(read_count, (snapshot_at, version)) AS last_read_count,
    argMax(total, (snapshot_at, version)) AS last_total,
    argMax(percent, (snapshot_at, version)) AS last_percent
FROM %s
GROUP BY project_id, message_id`, d.Table(SnapshotsTable.name))
	messages := "SELECT project_id, message_id, subject, last_snapshot_at, last_read_count, last_total, last_percent\nFROM " + withSubject(d, latest)
	return `SELECT
    project_id,
    nft,
    project_name,
    message_id,
    subject,
    last_snapshot_at AS snapshot_at,
    last_read_count AS read_count,
    last_total AS total,
    last_percent AS percent
FROM ` + withProject(d, messages)
}

// ProjectReadDailyV1 is the query of project_read_daily as migration 1
// creates it. A day is a UTC day whatever the server's time zone, like
// snapshot_at itself. Each message counts with its last snapshot of the
// day, so a project's line does not depend on how many passes ran that
// day. Migration 2 replaces it with dailyFromRollup.
func ProjectReadDailyV1(d DDL) string {
	days := fmt.Sprintf(`SELECT day, project_id, count() AS messages, sum(day_read_count) AS reads, sum(day_total) AS total
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
GROUP BY day, project_id`, d.Table(SnapshotsTable.name))
	return "SELECT day, project_id, nft, project_name, messages, reads, total, " + readRate + "\nFROM " + withProject(d, days)
}
