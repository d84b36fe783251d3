// Package migrate brings a database to readsync's schema, which package
// schema declares: the list of migrations and their steps, the runner
// that applies, one process at a time, those a database has not had and
// records them, the lock that makes the others wait, and the trial run
// that holds a server to the migrations without touching the database
// (Try, CheckViews). It computes no derived rows: migration 7's fold of
// reads gained is passed in (GainsFolder).
package migrate

import (
	"context"
	"fmt"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// DedupWindow is how many of a table's latest INSERTs a server that
// supports deduplication tokens remembers (the MergeTree setting
// non_replicated_deduplication_window, set by migration 4). An INSERT
// repeated within that many INSERTs into the same table adds nothing. At
// one INSERT per table per batch, 1000 covers weeks of hourly passes: far
// longer than a spool waits for a server that took an INSERT but whose
// answer was lost.
const DedupWindow = 1000

// migrations is the schema's history, oldest first: every database goes
// through these steps in order, each once (see migration for the rules a
// step follows). Append new steps; never change or remove one that has
// shipped, since databases have recorded it.
//
// The DDL uses only what ClickHouse 18.16 and current releases share: no
// DateTime64, Bool, LowCardinality, TTL or window functions, and the JOIN
// form of package schema's views.go. The tests run every step on both,
// and check every statement readsync sends for shapes one of them refuses
// (schema.RefusedBy, in schema's dialect_1816.go).
func migrations() []migration {
	return []migration{
		// The schema of the first release, as it created it; a database
		// that release wrote is adopted by running this step, whose
		// statements all find their objects there already.
		{id: 1, name: "create tables and views", sql: func(d schema.DDL) []string {
			stmts := []string{d.CreateDatabase()}
			for _, t := range []schema.TableDef{schema.ProjectsTable.Def(), schema.MessagesTable.Def(), schema.SnapshotsTable.Def(), schema.RunsTable.Def()} {
				stmts = append(stmts, d.CreateTable(t)...)
			}
			return append(stmts, d.CreateView(schema.LatestView, schema.MessageReadLatestV1(d)), d.CreateView(schema.DailyView, schema.ProjectReadDailyV1(d)))
		}},
		// Rollups for the views, so that a dashboard query costs what it
		// shows rather than the passes stored; see schema's rollups.go.
		{id: 2, name: "dashboard rollups", run: migrateRollups, creates: func(d schema.DDL) []string {
			return append(append(schema.RollupTablesDDL(d), schema.RollupViewsFillDDL(d)...), schema.RollupViewsDDL(d)...)
		}},
		// Releases before this one wrote the views' JOINs without aliases,
		// which current ClickHouse refuses (joined_subquery_requires_alias):
		// a database they set up on 18.16 broke when its server was
		// upgraded. Writing the views again in the form both accept mends
		// such a database; on one created since, it changes nothing.
		{id: 3, name: "views in the form current releases accept", sql: schema.RollupViewsDDL},
		// Exactly once where the server can: every INSERT carries a token
		// derived from its rows (chconn's dedup.go), and a table remembers
		// the tokens of its last DedupWindow INSERTs, so that a spool entry
		// replayed after its first attempt reached the server adds nothing.
		// The rollups that materialized views fill need the window too:
		// every INSERT sets deduplicate_blocks_in_dependent_materialized_views
		// (chconn's pinnedInsertSettings; its default is off), so that the
		// server checks each view's block in its own target, by a token
		// derived from the INSERT's, whatever its defaults or the user's
		// profile say (TestRetriedWriteLeavesEveryViewExact starts from the
		// setting off). Replicated tables remember their INSERTs already;
		// the others need the window, which 18.16 lacks: there the step
		// waits for the server's upgrade.
		{id: 4, name: "remember the last INSERTs to drop a repeated one", requires: chconn.Server.DedupTokens, sql: func(d schema.DDL) []string {
			if d.Clustered() {
				return nil
			}
			var stmts []string
			for _, t := range []string{schema.ProjectsTable.Name(), schema.MessagesTable.Name(), schema.SnapshotsTable.Name(), schema.RunsTable.Name(), schema.LatestRollup, schema.DailyRollup, schema.SnapshotRollup} {
				stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s MODIFY SETTING %s = %d", d.Table(t), chconn.SettingDedupWindow, DedupWindow))
			}
			return stmts
		}},
		// Every tick accounted for: sync_runs also records the ticks
		// that did not run (skipped, missed) and the shard of each, and
		// schedule_coverage counts them per schedule and day.
		{id: 5, name: "schedule coverage", creates: schema.CoverageViewDDL, run: func(ctx context.Context, m *migrator) error {
			if err := m.addColumn(ctx, schema.RunsTable.Name(), "shard", "String", "error"); err != nil {
				return err
			}
			for _, q := range schema.CoverageViewDDL(m.ddl) {
				if err := m.exec(ctx, q); err != nil {
					return err
				}
			}
			return nil
		}},
		// Reads gained per project and snapshot, and per day, computed
		// as readsync writes (package derived's gains.go); the history
		// written before is folded in by migration 7.
		{id: 6, name: "reads gained", run: migrateGains, creates: func(d schema.DDL) []string {
			return append(schema.GainsTablesDDL(d), schema.GainsViewsDDL(d)...)
		}},
		// Derived rows that can be checked and mended: the schedule
		// stored with the rows, the newest write in the gains rollup,
		// the change logs that reconciles read (migrateDerived).
		{id: 7, name: "derived history that repairs itself", run: migrateDerived, creates: func(d schema.DDL) []string {
			return append(schema.DerivedTablesDDL(d), schema.SnapshotsViewDDL(d)...)
		}},
		// A reconcile in bounded steps: each records the exact position
		// in the change logs it read up to, so that the next step reads
		// each change once, whatever the size of what waits. A database
		// of release 0.4.0 gets the columns; one created since has them
		// (schema's reconcilesTable), and the step then creates nothing.
		{id: 8, name: "reconcile in bounded steps", run: func(ctx context.Context, m *migrator) error {
			for _, c := range schema.ReconcileColumnsSince8 {
				if err := m.addColumn(ctx, schema.Reconciles, c.Name, c.Type, ""); err != nil {
					return err
				}
			}
			return nil
		}, creates: func(schema.DDL) []string { return nil }},
		// Reads that follow the change: message_read_snapshots sorted by
		// (project_id, snapshot_at, message_id), as a database created
		// since has it. This step only creates the record of the move,
		// which runs in the background, in bounded steps, while passes
		// go on (package resort).
		{id: 9, name: "snapshots sorted by project snapshot", sql: schema.ResortDDL},
		// Each name's health where operators look: the names a pass did
		// not read and why, the names it read, and the view of both
		// (schema's namehealth.go).
		{id: 10, name: "name health", sql: schema.NameHealthDDL},
		// History in bounded space: the record of the partitions expiry
		// drops, and of where each resolution's kept rows start
		// (schema's expiry.go). It deletes nothing: only a retention the
		// operator sets does.
		{id: 11, name: "record of expiry", sql: schema.ExpiriesDDL},
		// An hourly resolution with a retention of its own (schema's
		// hourly.go), filled from the history written before (hourly.go).
		{id: 12, name: "hourly resolution", run: migrateHourly, creates: func(d schema.DDL) []string {
			return schema.HourlyDDL(d, d.Local(schema.SnapshotsTable.Name()))
		}},
		// Compact storage: codecs for the snapshot table's columns where
		// the server has them (schema's codecs.go), as migration 4 applies
		// only where deduplication tokens exist; 18.16 refuses CODEC, and
		// the step waits for the server's upgrade. New parts take them, and
		// merges the old: nothing is rewritten.
		{id: 13, name: "compact storage", requires: chconn.Server.Codecs, run: migrateCodecs, creates: func(d schema.DDL) []string {
			return append(schema.CodecDDL(d, d.Local(schema.SnapshotsTable.Name())), schema.RollupCodecDDL(d)...)
		}},
		// Each name's failures by the hour, which name_health reads
		// instead of a day of failures (schema's namehealth_hours.go).
		{id: 14, name: "name failures by the hour", run: migrateNameFailureHours, creates: schema.NameFailureHoursDDL},
		// Refreshes that cost what they write: each project's tip, the
		// state its next snapshot's refresh builds on, and the record of
		// refreshes by which the reconcile leaves alone what a writer
		// refreshed (schema's tips.go).
		{id: 15, name: "project tips and the record of refreshes", sql: schema.TipsDDL},
		// Reads on the message's own clock: the age rollup, which each
		// write fills from its rows, and the views over it (schema's
		// age.go), with the history written before folded in (ages.go).
		{id: 16, name: "reads by message age", run: migrateAges, creates: schema.AgeDDL},
		// How fast each message was read, stored: the speed rollup, a row
		// per message that the writes refresh, and message_read_speed
		// over it (schema's speed.go), folded from the age rollup
		// (speeds.go).
		{id: 17, name: "message speeds stored", run: migrateSpeeds, creates: schema.SpeedDDL},
	}
}
