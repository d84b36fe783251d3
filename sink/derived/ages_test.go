package derived_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/expiry"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
	"github.com/readsync/readsync/sink/verify"
	"github.com/readsync/readsync/sync"
)

// The messages of the age tests, served by the fake upstream in
// Europe/Berlin time, each growing on a known curve of its age.
//
//   - A (project 1, message 101), created 2026-03-02 10:20 CET (09:20 UTC):
//     5 reads an hour of age up to 300 at 60 hours, then 1 an hour.
//   - D (project 1, message 104), created two hours later: twice A's curve.
//   - B (project 1, message 102), created 2026-02-26 10:20 CET, four days
//     before the first pass: 80 reads throughout, first seen at 95 h 40 min.
//   - C (project 2, message 201), created 2026-03-29 01:30 CET, half an hour
//     before clocks go forward in Berlin: 10 reads an hour of age.
//
// Project 1's passes run hourly on the hour (UTC) from 2026-03-02 09:00 to
// 2026-03-05 12:00, then daily at 12:00 to 2026-03-09; project 2's hourly
// from 2026-03-29 00:00 to 04:00 UTC.
var (
	ageZone, _ = time.LoadLocation("Europe/Berlin")
	createdA   = time.Date(2026, 3, 2, 9, 20, 0, 0, time.UTC)
	createdD   = createdA.Add(2 * time.Hour)
	createdB   = time.Date(2026, 2, 26, 9, 20, 0, 0, time.UTC)
	createdC   = time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
)

// curveA is A's reads at age d: 5 a whole hour up to 300, then 1.
func curveA(d time.Duration) int64 {
	h := int64(d / time.Hour)
	if h <= 60 {
		return 5 * h
	}
	return 300 + h - 60
}

func agePasses() (p1, p2 []time.Time) {
	for t := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC); !t.After(time.Date(2026, 3, 5, 12, 0, 0, 0, time.UTC)); t = t.Add(time.Hour) {
		p1 = append(p1, t)
	}
	for d := 6; d <= 9; d++ {
		p1 = append(p1, time.Date(2026, 3, d, 12, 0, 0, 0, time.UTC))
	}
	for h := 0; h <= 4; h++ {
		p2 = append(p2, time.Date(2026, 3, 29, h, 0, 0, 0, time.UTC))
	}
	return p1, p2
}

// ageMessage is a message as the fake serves it at pass time at, when it
// was created by then.
func ageMessage(id int64, created, at time.Time, reads, total int64) (apitest.Message, bool) {
	if at.Before(created) {
		return apitest.Message{}, false
	}
	return apitest.Message{ID: id, Subject: fmt.Sprintf("message %d", id), CreateAt: created.In(ageZone).Format("2006-01-02 15:04:05"),
		ReadCount: reads, Total: total, Percent: apitest.PercentOf(reads, total)}, true
}

// runAgePasses runs the passes of the age tests through the fake upstream
// into ch.
func runAgePasses(t *testing.T, ch *clickhouse.ClickHouse) {
	t.Helper()
	srv := apitest.NewServer()
	t.Cleanup(srv.Close)
	api, err := apiclient.New(apiclient.Config{BaseURL: srv.URL, ClientID: apitest.DefaultClientID, ClientSecret: apitest.DefaultClientSecret,
		MaxRetries: 1, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := sync.New(sync.Config{Source: api, Sink: ch, Location: ageZone, WriteBackoff: time.Millisecond})
	pass := func(nft string, at time.Time) {
		rep, err := s.Run(context.Background(), sync.Pass{Names: []string{nft}, Schedule: "hourly", Trigger: sync.TriggerCron, SnapshotAt: at})
		if err != nil || rep.Run.Status != "ok" {
			t.Fatalf("pass at %v: %v (%+v)", at, err, rep.Run)
		}
	}
	p1, p2 := agePasses()
	for _, at := range p1 {
		p := apitest.Project{ID: 1, NFT: "one.eth", Name: "One"}
		for _, m := range []struct {
			id      int64
			created time.Time
			reads   int64
			total   int64
		}{
			{101, createdA, curveA(at.Sub(createdA)), 1000},
			{102, createdB, 80, 100},
			{104, createdD, 2 * curveA(at.Sub(createdD)), 2000},
		} {
			if msg, ok := ageMessage(m.id, m.created, at, m.reads, m.total); ok {
				p.Messages = append(p.Messages, msg)
			}
		}
		srv.SetProject(p)
		pass("one.eth", at)
	}
	for _, at := range p2 {
		p := apitest.Project{ID: 2, NFT: "two.eth", Name: "Two"}
		if msg, ok := ageMessage(201, createdC, at, 10*int64(at.Sub(createdC)/time.Hour+1), 100); ok {
			p.Messages = append(p.Messages, msg)
		}
		srv.SetProject(p)
		pass("two.eth", at)
	}
}

// ageRow is a row of message_read_by_age.
type ageRow struct {
	age               uint32
	snapshotAt        time.Time
	reads, total      uint64
	rate              float64
	createAt          time.Time
	firstSeenAgeHours uint32
}

func readByAge(t *testing.T, db *sinktest.DB, project, message int64) map[uint32]ageRow {
	t.Helper()
	rows, err := db.Conn.Query(context.Background(), `SELECT age_hours, snapshot_at, reads, total, read_rate, create_at, first_seen_age_hours
FROM `+db.Table("message_read_by_age")+` WHERE project_id = ? AND message_id = ? ORDER BY age_hours`, project, message)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uint32]ageRow{}
	for rows.Next() {
		var r ageRow
		if err := rows.Scan(&r.age, &r.snapshotAt, &r.reads, &r.total, &r.rate, &r.createAt, &r.firstSeenAgeHours); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[r.age]; dup {
			t.Errorf("message %d: two rows of age %d", message, r.age)
		}
		r.snapshotAt, r.createAt = r.snapshotAt.UTC(), r.createAt.UTC()
		out[r.age] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ages lists the ages a curve has from first to last: every hour up to
// 72, then every 24.
func ages(first, last uint32) []uint32 {
	var out []uint32
	for a := first; a <= last; a++ {
		if a <= 72 || a%24 == 0 {
			out = append(out, a)
		}
	}
	return out
}

func hourAt(day, hour int) time.Time { return time.Date(2026, 3, day, hour, 0, 0, 0, time.UTC) }

// checkCurve compares a message's rows with want: age → (snapshot, reads).
func checkCurve(t *testing.T, name string, got map[uint32]ageRow, first, last uint32, created time.Time, firstSeen uint32, total uint64, want map[uint32]ageRow) {
	t.Helper()
	grid := ages(first, last)
	if len(got) != len(grid) {
		t.Errorf("%s: %d rows, want %d (ages %d to %d)", name, len(got), len(grid), first, last)
	}
	for _, a := range grid {
		if _, ok := got[a]; !ok {
			t.Errorf("%s: no row of age %d", name, a)
		}
	}
	for _, r := range got {
		if !r.createAt.Equal(created) || r.firstSeenAgeHours != firstSeen || r.total != total {
			t.Errorf("%s age %d: create_at %v, first seen at %d h, total %d; want %v, %d h, %d", name, r.age, r.createAt, r.firstSeenAgeHours, r.total, created, firstSeen, total)
		}
		if r.rate != float64(r.reads)/float64(r.total) {
			t.Errorf("%s age %d: read_rate %v, want %d/%d", name, r.age, r.rate, r.reads, r.total)
		}
	}
	for a, w := range want {
		g, ok := got[a]
		if !ok {
			continue
		}
		if !g.snapshotAt.Equal(w.snapshotAt) || g.reads != w.reads {
			t.Errorf("%s age %d: snapshot %v with %d reads, want %v with %d", name, a, g.snapshotAt, g.reads, w.snapshotAt, w.reads)
		}
	}
}

// checkAgeCurves holds the views on the message's clock to the numbers
// worked out by hand from the passes and curves above.
func checkAgeCurves(t *testing.T, db *sinktest.DB) {
	t.Helper()
	// A: the row of age h (h ≥ 1, hourly) is the pass at 09:00 + h UTC,
	// 20 minutes before create_at + h, when A was h - 1 h 20 min old:
	// 5(h - 1) reads. First seen at 10:00 (40 minutes old): bucket 1.
	// Past 72, the row of 96 is the last hourly pass (03-05 12:00, 74 h
	// 40 min: 314), those of 120, 144, 168 and 192 the daily passes at
	// 98, 122, 146 and 170 h 40 min (338, 362, 386, 410).
	checkCurve(t, "A", readByAge(t, db, 1, 101), 1, 192, createdA, 0, 1000, map[uint32]ageRow{
		1:   {snapshotAt: hourAt(2, 10), reads: 0},
		2:   {snapshotAt: hourAt(2, 11), reads: 5},
		24:  {snapshotAt: hourAt(3, 9), reads: 115},
		61:  {snapshotAt: hourAt(4, 22), reads: 300},
		72:  {snapshotAt: hourAt(5, 9), reads: 311},
		96:  {snapshotAt: hourAt(5, 12), reads: 314},
		120: {snapshotAt: hourAt(6, 12), reads: 338},
		144: {snapshotAt: hourAt(7, 12), reads: 362},
		168: {snapshotAt: hourAt(8, 12), reads: 386},
		192: {snapshotAt: hourAt(9, 12), reads: 410},
	})
	// D, two hours younger, first seen at 12:00 (40 minutes old); its last
	// hourly pass is 72 h 40 min old (bucket 96, 2 × 312), its daily ones
	// 96, 120, 144 and 168 h 40 min old (buckets 120 to 192).
	checkCurve(t, "D", readByAge(t, db, 1, 104), 1, 192, createdD, 0, 2000, map[uint32]ageRow{
		1:   {snapshotAt: hourAt(2, 12), reads: 0},
		6:   {snapshotAt: hourAt(2, 17), reads: 50},
		72:  {snapshotAt: hourAt(5, 11), reads: 622},
		96:  {snapshotAt: hourAt(5, 12), reads: 624},
		120: {snapshotAt: hourAt(6, 12), reads: 672},
		192: {snapshotAt: hourAt(9, 12), reads: 816},
	})
	// B, first seen at 95 h 40 min: its curve starts at 96 and says so.
	// The row of 96 is that first pass (03-02 09:00); of 120, the pass at
	// 03-03 09:00, 119 h 40 min; the last, 266 h 40 min, is bucket 288.
	checkCurve(t, "B", readByAge(t, db, 1, 102), 96, 288, createdB, 95, 100, map[uint32]ageRow{
		96:  {snapshotAt: hourAt(2, 9), reads: 80},
		120: {snapshotAt: hourAt(3, 9), reads: 80},
		168: {snapshotAt: hourAt(5, 9), reads: 80},
		192: {snapshotAt: hourAt(5, 12), reads: 80},
		216: {snapshotAt: hourAt(6, 12), reads: 80},
		288: {snapshotAt: hourAt(9, 12), reads: 80},
	})
	// C, created at 01:30 Berlin time on the night clocks go forward:
	// 00:30 UTC (CET). Read as CEST it would be 23:30 UTC the day before,
	// and every bucket one hour later.
	checkCurve(t, "C", readByAge(t, db, 2, 201), 1, 4, createdC, 0, 100, map[uint32]ageRow{
		1: {snapshotAt: time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), reads: 10},
		2: {snapshotAt: time.Date(2026, 3, 29, 2, 0, 0, 0, time.UTC), reads: 20},
		4: {snapshotAt: time.Date(2026, 3, 29, 4, 0, 0, 0, time.UTC), reads: 40},
	})

	// message_read_speed.
	type speed struct {
		r1, r6, r24, r72, r7d  sql.NullInt64
		latest                 uint64
		share                  sql.NullFloat64
		halfMin, halfMax       sql.NullInt64
		ninthsMin, ninthsMax   sql.NullInt64
		subject, nft, projName string
	}
	n := func(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }
	null := sql.NullInt64{}
	want := map[int64]speed{
		// A: latest 410; half (205) first at 42 h (5 × 41), below at 41;
		// nine tenths (369) first at 168 (386), below at 144 (362).
		101: {n(0), n(25), n(115), n(311), n(386), 410, sql.NullFloat64{Float64: 115.0 / 410, Valid: true}, n(41), n(42), n(144), n(168), "message 101", "one.eth", "One"},
		// D: latest 816 (2 × 408); half (408) first at 42 h (2 × 205 = 410),
		// below at 41 (400); nine tenths (734.4) first at 168 (144 h 40 min
		// old: 2 × 384 = 768), below at 144 (2 × 360 = 720).
		104: {n(0), n(50), n(230), n(622), n(768), 816, sql.NullFloat64{Float64: 230.0 / 816, Valid: true}, n(41), n(42), n(144), n(168), "message 104", "one.eth", "One"},
		// B: first seen at 96, already at its latest: no age below to
		// bound the lower end, nothing known before 96.
		102: {null, null, null, null, n(80), 80, sql.NullFloat64{}, null, n(96), null, n(96), "message 102", "one.eth", "One"},
		// C: latest 40 at 4 h; half (20) first at 2, nine tenths (36) at 4.
		201: {n(10), null, null, null, null, 40, sql.NullFloat64{}, n(1), n(2), n(3), n(4), "message 201", "two.eth", "Two"},
	}
	rows, err := db.Conn.Query(context.Background(), `SELECT message_id, reads_1h, reads_6h, reads_24h, reads_72h, reads_7d, latest_reads, share_24h,
    half_after_hours_min, half_after_hours_max, nine_tenths_after_hours_min, nine_tenths_after_hours_max, subject, nft, project_name
FROM `+db.Table("message_read_speed")+` ORDER BY message_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var (
			id                     int64
			r1, r6, r24, r72, r7d  *uint64
			hMin, hMax, nMin, nMax *uint32
			share                  *float64
			got                    speed
		)
		if err := rows.Scan(&id, &r1, &r6, &r24, &r72, &r7d, &got.latest, &share, &hMin, &hMax, &nMin, &nMax, &got.subject, &got.nft, &got.projName); err != nil {
			t.Fatal(err)
		}
		u := func(p *uint64) sql.NullInt64 {
			if p == nil {
				return null
			}
			return n(int64(*p))
		}
		h := func(p *uint32) sql.NullInt64 {
			if p == nil {
				return null
			}
			return n(int64(*p))
		}
		got.r1, got.r6, got.r24, got.r72, got.r7d = u(r1), u(r6), u(r24), u(r72), u(r7d)
		got.halfMin, got.halfMax, got.ninthsMin, got.ninthsMax = h(hMin), h(hMax), h(nMin), h(nMax)
		if share != nil {
			got.share = sql.NullFloat64{Float64: *share, Valid: true}
		}
		seen++
		if w, ok := want[id]; !ok || got != w {
			t.Errorf("message_read_speed of message %d:\n got %+v\nwant %+v", id, got, w)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(want) {
		t.Errorf("message_read_speed has %d rows, want %d", seen, len(want))
	}
	// The view shows the speed rollup's rows: a row per message there.
	if got := sinktest.Lines(t, db.Conn, "SELECT toString(count()) FROM "+db.Table(schema.SpeedRollup)+" FINAL"); len(got) != 1 || got[0] != fmt.Sprint(len(want)) {
		t.Errorf("%s holds %v rows, want %d", schema.SpeedRollup, got, len(want))
	}

	// project_read_by_age: at 5 h, A (20) and D (40); at 96, B (80), A
	// (314) and D (624); at 288, B alone. A percentile is the value at
	// rank floor(q × n): of two, p10 the lower, median and p90 the
	// higher.
	for _, c := range []struct {
		age                 uint32
		messages            uint64
		p10, median, p90    uint64
		rp10, rmedian, rp90 float64
	}{
		{5, 2, 20, 40, 40, 0.02, 0.02, 0.02},
		{96, 3, 80, 314, 624, 0.312, 0.314, 0.8},
		{288, 1, 80, 80, 80, 0.8, 0.8, 0.8},
	} {
		var (
			messages, p10, median, p90 uint64
			rp10, rmedian, rp90        float64
		)
		row := db.Conn.QueryRow(context.Background(), `SELECT messages, reads_p10, reads_median, reads_p90, read_rate_p10, read_rate_median, read_rate_p90
FROM `+db.Table("project_read_by_age")+` WHERE project_id = 1 AND age_hours = ?`, c.age)
		if err := row.Scan(&messages, &p10, &median, &p90, &rp10, &rmedian, &rp90); err != nil {
			t.Fatalf("project_read_by_age at %d h: %v", c.age, err)
		}
		if messages != c.messages || p10 != c.p10 || median != c.median || p90 != c.p90 || rp10 != c.rp10 || rmedian != c.rmedian || rp90 != c.rp90 {
			t.Errorf("project_read_by_age at %d h: %d messages, reads %d/%d/%d, rates %v/%v/%v; want %d, %d/%d/%d, %v/%v/%v", c.age,
				messages, p10, median, p90, rp10, rmedian, rp90, c.messages, c.p10, c.median, c.p90, c.rp10, c.rmedian, c.rp90)
		}
	}
}

// Both servers: the views on the message's clock equal the numbers worked
// out by hand from known passes over known curves, including a message
// first seen days after its creation and one created just before a DST
// change.
func TestReadsByAge(t *testing.T) {
	if ageZone == nil {
		t.Fatal("no time zone Europe/Berlin")
	}
	ch, db := historytest.OpenTestSink(t)
	runAgePasses(t, ch)
	checkAgeCurves(t, db)
}

// A database whose history was written before the age rollup existed
// gets the same curves from migration 16's fold: the rows of the passes
// above, copied into a database at migration 15, then migrated.
func TestReadsByAgeFoldedFromHistory(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	runAgePasses(t, ch)
	old := sinktest.New(t)
	historytest.MigrateFirst(t, old.DSN, 15)
	for _, table := range []string{"projects", "messages", "message_read_snapshots"} {
		if err := old.Conn.Exec(context.Background(), fmt.Sprintf("INSERT INTO %s SELECT * FROM %s", old.Table(table), db.Table(table))); err != nil {
			t.Fatalf("copy %s: %v", table, err)
		}
	}
	if n := old.Count(t, "message_read_snapshots"); n == 0 {
		t.Fatal("no snapshot rows copied")
	}
	if err := historytest.OpenSink(t, old.DSN).Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAgeCurves(t, old)
}

// A database at migration 16, whose age rollup the writes filled, gets
// from migration 17's fold the speeds the writes give: the rows of the
// passes above and their age rollup, copied into a database at migration
// 16, then migrated, hold the same speed rows, version included, and
// the same hand-computed values.
func TestSpeedsFoldedFromTheAgeRollup(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	runAgePasses(t, ch)
	old := sinktest.New(t)
	historytest.MigrateFirst(t, old.DSN, 16)
	for _, table := range []string{"projects", "messages", "message_read_snapshots", schema.AgeRollup} {
		if err := old.Conn.Exec(context.Background(), fmt.Sprintf("INSERT INTO %s SELECT * FROM %s", old.Table(table), db.Table(table))); err != nil {
			t.Fatalf("copy %s: %v", table, err)
		}
	}
	if n := old.Count(t, schema.AgeRollup); n == 0 {
		t.Fatal("no age rows copied")
	}
	migrated := historytest.OpenSink(t, old.DSN)
	if err := migrated.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	q := "SELECT toString(tuple(*)) FROM %s FINAL ORDER BY project_id, message_id"
	written, folded := sinktest.Lines(t, db.Conn, fmt.Sprintf(q, db.Table(schema.SpeedRollup))), sinktest.Lines(t, old.Conn, fmt.Sprintf(q, old.Table(schema.SpeedRollup)))
	if len(written) != 4 || !slices.Equal(written, folded) {
		t.Errorf("the speeds folded differ from the speeds written:\nwritten %v\n folded %v", written, folded)
	}
	checkAgeCurves(t, old)
	// The views on the message's clock equal their brute force (the
	// other rollups were folded before the rows were copied: empty).
	rep, err := migrated.Verify(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Views {
		if (v.View == schema.ByAgeView || v.View == schema.SpeedView || v.View == schema.ProjectByAgeView) && (v.Rows == 0 || v.Differs()) {
			t.Errorf("%s: %d rows judged, %d missing, %d extra, %d wrong", v.View, v.Rows, v.MissingRows, v.ExtraRows, v.WrongRows)
		}
	}
}

// A wrong row in the speed rollup, one that outranks the right one:
// --verify finds message_read_speed wrong, and --repair computes the row
// again from the message's curve.
func TestWrongSpeedVerifiedAndRepaired(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	runAgePasses(t, ch)
	// Every value 0 or NULL but the latest reads, 7.
	row := fmt.Sprintf(`SELECT toInt64(1) AS project_id, toInt64(101) AS message_id, toDateTime(%d) AS create_at, toUInt32(0) AS first_seen_age_hours,
    CAST(NULL AS Nullable(UInt64)) AS reads_1h, reads_1h AS reads_6h, reads_1h AS reads_24h, reads_1h AS reads_72h, reads_1h AS reads_7d,
    toUInt64(7) AS latest_reads, CAST(NULL AS Nullable(Float64)) AS share_24h, CAST(NULL AS Nullable(UInt32)) AS half_after_hours_min,
    half_after_hours_min AS half_after_hours_max, half_after_hours_min AS nine_tenths_after_hours_min, half_after_hours_min AS nine_tenths_after_hours_max,
    toUInt64(18446744073709551615) AS version, toUInt32(0) AS first_age_hours, toUInt32(0) AS latest_age_hours, toDateTime(0) AS latest_at,
    toUInt64(0) AS latest_version, toUInt32(0) AS half_age_hours, toUInt64(0) AS half_reads, toUInt64(0) AS half_between_reads,
    toUInt32(0) AS nine_tenths_age_hours, toUInt64(0) AS nine_tenths_reads, toUInt64(0) AS nine_tenths_between_reads`, createdA.Unix())
	if err := db.Conn.Exec(ctx, schema.SpeedInsert(chconn.NewNames(db.Name, chconn.Topology{}), row)); err != nil {
		t.Fatal(err)
	}
	rep, err := ch.Verify(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range rep.Views {
		if v.View == schema.SpeedView {
			found = v.WrongRows == 1 && v.MissingRows == 0 && v.ExtraRows == 0 && slices.Equal(v.Projects, []int64{1})
			if !found {
				t.Errorf("--verify of %s: %d wrong, %d missing, %d extra rows of projects %v; want the one wrong row of project 1", v.View, v.WrongRows, v.MissingRows, v.ExtraRows, v.Projects)
			}
		} else if v.Differs() {
			t.Errorf("--verify finds %s wrong too: %+v", v.View, v)
		}
	}
	if !found {
		t.Fatalf("--verify does not report the wrong speed row: %+v", rep.Views)
	}
	if err := ch.Repair(ctx, rep); err != nil {
		t.Fatal(err)
	}
	checkAgeCurves(t, db)
	historytest.AssertVerified(t, ch, time.Time{})
}

// Snapshot rows written before their messages' rows (a batch of message
// rows spooled while a later batch with their snapshots got through)
// have no age at first: --verify finds the rows missing, and --repair
// gives them theirs once the messages' rows are there.
func TestAgesOfSnapshotsWrittenBeforeTheirMessages(t *testing.T) {
	ch, _ := historytest.OpenTestSink(t)
	ctx := context.Background()
	h := historytest.NewHistory(t, ch)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h.Pass(day)
	b := h.Fetch(1, day.Add(4*time.Hour), h.NextVersion())
	h.Write(&sink.Batch{Snapshots: b.Snapshots, Schedule: historytest.Schedule})
	// A new message: its snapshot comes first, its row after.
	fresh := sink.Message{ProjectID: 1, ID: 199, Subject: "late", CreateAt: sink.TimeOf(day.Add(3 * time.Hour)), Version: h.NextVersion()}
	h.Write(&sink.Batch{Snapshots: []sink.Snapshot{{ProjectID: 1, MessageID: 199, SnapshotAt: sink.TimeOf(day.Add(5 * time.Hour)),
		ReadCount: 3, Total: 9, Version: fresh.Version}}, Schedule: historytest.Schedule})
	h.Write(&sink.Batch{Projects: b.Projects, Messages: append(b.Messages, fresh), Schedule: historytest.Schedule})
	rep, err := ch.Verify(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Views {
		if v.View == "message_read_by_age" && v.MissingRows == 0 {
			t.Errorf("message_read_by_age lacks no row before the reconcile: %+v", v)
		}
	}
	if err := ch.Repair(ctx, rep); err != nil {
		t.Fatal(err)
	}
	historytest.AssertVerified(t, ch, time.Time{})
}

// After the raw rows expire, the curves of the expired span come from
// the age rollup unchanged, and --verify takes them as given.
func TestCurvesOutliveRawExpiry(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	runAgePasses(t, ch)
	if _, err := ch.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	// Every pass was in March 2026: a raw retention of a day drops them
	// all; the hourly and daily resolutions are kept.
	rep, err := ch.Expire(ctx, expiry.Policy{schema.Raw: 24 * time.Hour}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Dropped) == 0 {
		t.Fatal("nothing expired")
	}
	if n := db.Count(t, schema.SnapshotsTable.Name()); n != 0 {
		t.Fatalf("%d raw rows remain", n)
	}
	checkAgeCurves(t, db)
	historytest.AssertVerified(t, ch, time.Time{})
	// A repair of the projects computes their speeds again from the age
	// rollup, which kept the curves: the same speeds.
	if err := ch.Repair(ctx, verify.Report{Views: []verify.ViewDiff{{View: schema.SpeedView, WrongRows: 1, Projects: []int64{1, 2}}}}); err != nil {
		t.Fatal(err)
	}
	checkAgeCurves(t, db)
}

// The speed rollup never expires (a row per message, like the latest
// rollup): when every row of the messages' curves expired, raw and age
// rows alike, their speeds stay as they were, through --verify, which
// judges none of them, and through a repair of their projects, which has
// no curve to compute them from.
func TestSpeedsOutliveTheirCurves(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	runAgePasses(t, ch)
	if _, err := ch.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	before := speedRollupRows(t, db)
	if len(before) != 4 {
		t.Fatalf("%d speed rows before expiry, want 4 (messages A, B, C, D): %q", len(before), before)
	}
	// Every pass was in March 2026: a day of each resolution drops every
	// raw and age row.
	if _, err := ch.Expire(ctx, expiry.Policy{schema.Raw: 24 * time.Hour, schema.Daily: 24 * time.Hour}, ""); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{schema.SnapshotsTable.Name(), schema.AgeRollup} {
		if n := db.Count(t, table); n != 0 {
			t.Fatalf("%d rows of %s remain after expiry", n, table)
		}
	}
	if got := speedRollupRows(t, db); !slices.Equal(got, before) {
		t.Fatalf("speed rows after expiry:\n%q\nwant them as before:\n%q", got, before)
	}
	historytest.AssertVerified(t, ch, time.Time{})
	if err := ch.Repair(ctx, verify.Report{Views: []verify.ViewDiff{{View: schema.SpeedView, WrongRows: 1, Projects: []int64{1, 2}}}}); err != nil {
		t.Fatal(err)
	}
	if got := speedRollupRows(t, db); !slices.Equal(got, before) {
		t.Fatalf("speed rows after a repair:\n%q\nwant them as before:\n%q", got, before)
	}
}

// speedRollupRows reads every stored value of the speed rollup, a line a
// message.
func speedRollupRows(t *testing.T, db *sinktest.DB) []string {
	t.Helper()
	rows, err := db.Conn.Query(context.Background(), fmt.Sprintf(
		"SELECT project_id, message_id, toUInt32(create_at), version, speed_nulls, speed_share_24h, speed_values FROM %s FINAL ORDER BY project_id, message_id",
		db.Table(schema.SpeedRollup)))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			project, message int64
			created          uint32
			version          uint64
			nulls            uint16
			share            float64
			values           []uint64
		)
		if err := rows.Scan(&project, &message, &created, &version, &nulls, &share, &values); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(project, message, created, version, nulls, share, values))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
