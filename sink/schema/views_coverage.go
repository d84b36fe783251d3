package schema

import "fmt"

// CoverageView counts, per schedule and UTC day, the ticks due and how
// they fared, from the run records of sync_runs: readsync records every
// tick of a schedule, whether a pass ran (ok, partial, failed) or not
// (skipped: the previous pass still ran; missed: readsync was not
// running). In a sharded deployment each shard records its own; a tick
// counts as run when every shard that recorded it ran it, and as ok when
// every one finished ok. A run record written twice (a replay) counts
// once: ticks are told apart by their time.
const CoverageView = "schedule_coverage"

// CoverageViewDDL creates schedule_coverage, as migration 5 does.
func CoverageViewDDL(d DDL) []string {
	return []string{d.CreateView(CoverageView, scheduleCoverage(d))}
}

func scheduleCoverage(d DDL) string {
	return fmt.Sprintf(`SELECT
    schedule,
    day,
    count() AS ticks_due,
    countIf(tick_ran = 1) AS ticks_run,
    countIf(tick_ok = 1) AS ticks_ok,
    countIf(tick_skipped = 1) AS ticks_skipped,
    countIf(tick_missed = 1) AS ticks_missed
FROM
(
    SELECT
        schedule,
        snapshot_at AS tick,
        toDate(snapshot_at, 'UTC') AS day,
        min(status IN ('ok', 'partial', 'failed')) AS tick_ran,
        min(status = 'ok') AS tick_ok,
        max(status = 'skipped') AS tick_skipped,
        max(status = 'missed') AS tick_missed
    FROM %s
    WHERE trigger = 'cron'
    GROUP BY schedule, tick, day
)
GROUP BY schedule, day`, d.Table(RunsTable.name))
}
