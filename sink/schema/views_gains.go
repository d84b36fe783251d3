package schema

import "fmt"

// The third generation of the views: reads gained, from the gains rollups
// that the refreshes keep (migration 6), and, from migration 7 on, the
// per-snapshot view from the same rows.

// snapshotsFromGains is project_read_snapshots from migration 7 on: each
// project snapshot's newest write, as the refresh of its gains with the
// highest key saw it (see package derived's gains.go).
func snapshotsFromGains(d DDL) string {
	snaps := fmt.Sprintf(`SELECT
    project_id,
    snapshot_at,
    tupleElement(w, 1) AS messages,
    tupleElement(w, 2) AS reads,
    tupleElement(w, 3) AS total
FROM
(
    SELECT project_id, snapshot_at, argMax((gain_snap_messages, gain_snap_reads, gain_snap_total), gain_key) AS w
    FROM %s
    GROUP BY project_id, snapshot_at
)`, d.Table(GainsRollup))
	return "SELECT snapshot_at, project_id, nft, project_name, messages, reads, total, " + readRate + "\nFROM " + withProject(d, snaps)
}

// gainsPerSnapshot selects, per project and snapshot, the values of the
// refresh with the highest key (see package derived's gains.go), as the
// tuple g: previous snapshot time, messages, new messages, reads gained,
// missed ticks.
func gainsPerSnapshot(d DDL) string {
	return fmt.Sprintf(`SELECT
    project_id,
    snapshot_at,
    argMax((gain_prev_at, gain_messages, gain_new_messages, gain_reads, gain_missed_ticks), gain_key) AS g
FROM %s
GROUP BY project_id, snapshot_at`, d.Table(GainsRollup))
}

// projectReadGains is project_read_gains: per project and snapshot, the
// reads its messages gained since each one's previous snapshot, and
// whether the interval spans ticks that gave the project nothing.
func projectReadGains(d DDL) string {
	snaps := `SELECT
    project_id,
    snapshot_at,
    if(toUInt32(tupleElement(g, 1)) = 0, NULL, tupleElement(g, 1)) AS prev_snapshot_at,
    tupleElement(g, 2) AS messages,
    tupleElement(g, 3) AS new_messages,
    tupleElement(g, 4) AS reads_gained,
    tupleElement(g, 5) AS missed_ticks
FROM
(
` + indent(gainsPerSnapshot(d)) + `
)`
	return "SELECT snapshot_at, project_id, nft, project_name, prev_snapshot_at, messages, new_messages, reads_gained, missed_ticks\nFROM " + withProject(d, snaps)
}

// projectReadDailyGains is project_read_daily_gains: the gains of a
// project's snapshots summed per UTC day, from the day gains rollup (see
// package derived's gaindays.go). An interval counts on the day of the snapshot that ends
// it, its missed ticks too.
func projectReadDailyGains(d DDL) string {
	days := fmt.Sprintf(`SELECT
    project_id,
    day,
    tupleElement(v, 1) AS snapshots,
    tupleElement(v, 2) AS new_messages,
    tupleElement(v, 3) AS reads_gained,
    tupleElement(v, 4) AS missed_ticks
FROM
(
    SELECT project_id, day, argMaxMerge(day_gain_state) AS v
    FROM %s
    GROUP BY project_id, day
)`, d.Table(DayGainsRollup))
	return "SELECT day, project_id, nft, project_name, snapshots, new_messages, reads_gained, missed_ticks\nFROM " + withProject(d, days)
}

// gainsViews are the views of reads gained, as migration 6 creates them.
func gainsViews(d DDL) []view {
	return []view{{GainsView, projectReadGains(d)}, {DailyGainsView, projectReadDailyGains(d)}}
}

// GainsViewsDDL creates the views of reads gained (views_gains.go).
func GainsViewsDDL(d DDL) []string {
	var stmts []string
	for _, v := range gainsViews(d) {
		stmts = append(stmts, d.CreateView(v.name, v.query))
	}
	return stmts
}

// SnapshotsViewDDL writes project_read_snapshots again from the gains
// rollup, as migration 7 does.
func SnapshotsViewDDL(d DDL) []string {
	return d.replaceView(view{SnapshotView, snapshotsFromGains(d)})
}
