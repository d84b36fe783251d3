package grafana_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// The panels on the message's clock, as Grafana and the plugin send
// them with All projects, hold the fixture's numbers: every message was
// created two hours before the first pass (08:00 on March 1) and seen
// again at 30 hours of age (12:00 on March 2), with reads of its id, then
// twice its id.
func TestDashboardAgePanels(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	writeRunsFixture(t, ch)
	writeDashboardFixture(t, ch)
	conn := db.OpenCurrent(t)
	d := loadDashboard(t)
	vars := dashboardVariables(t, conn, d)
	if m := vars["message"]; m == nil || len(m.Current) != 1 || m.Current[0] != "1-11" {
		t.Fatalf("the message variable selects %+v, want the first of the newest messages, 1-11", m)
	}
	run := func(title string) (cols []string, rows [][]string) {
		t.Helper()
		i := slices.IndexFunc(queryPanels(d), func(p panel) bool { return p.Title == title })
		if i < 0 {
			t.Fatalf("no panel %q", title)
		}
		p := queryPanels(d)[i]
		sql := dashboardSQL(t, d, &p, p.Targets[0].RawSQL, vars)
		cols, raw, err := pluginRun(conn, sql)
		if err != nil {
			t.Fatalf("%s: %v\n%s", title, err, sql)
		}
		for _, r := range raw {
			var texts []string
			for _, v := range r {
				texts = append(texts, grafanaText(v))
			}
			rows = append(rows, texts)
		}
		return cols, rows
	}

	// Message 11 of project 1 against project 1's messages 11 and 12:
	// ages 2 to 30, 11 reads (of 11 and 12) up to 29, 22 (of 22 and 24) at
	// 30. Of two values the 10th percentile is the lower, the median and
	// the 90th the higher.
	cols, rows := run("Reach by age against its project")
	if want := []string{"age_hours", "reads", "reads_p10", "reads_median", "reads_p90"}; !slices.Equal(cols, want) {
		t.Fatalf("reach panel columns %v, want %v", cols, want)
	}
	if len(rows) != 29 {
		t.Errorf("reach panel: %d ages, want 29 (2 to 30)", len(rows))
	}
	for _, r := range rows {
		want := "11 11 12 12"
		if r[0] == "30" {
			want = "22 22 24 24"
		}
		if got := strings.Join(r[1:], " "); got != want {
			t.Errorf("reach panel at %s h: %s, want %s", r[0], got, want)
		}
	}

	// Every message's first day, in reads gained each hour: unknown at 1
	// hour (first seen at 2), and at 2 (no reads known an hour younger),
	// none from 3 to 24 (its id throughout).
	cols, rows = run("First 24 hours of the latest messages")
	if len(rows) != 8 {
		t.Errorf("first-day panel: %d messages, want all 8", len(rows))
	}
	hour := func(h int) int { return slices.Index(cols, fmt.Sprintf("h%d", h)) }
	subject := slices.Index(cols, "subject")
	for _, r := range rows {
		if r[hour(1)] != "" || r[hour(2)] != "" || r[hour(3)] != "0" || r[hour(24)] != "0" {
			t.Errorf("first-day panel, %s: h1 %q, h2 %q, h3 %q, h24 %q; want none, none, 0, 0", r[subject], r[hour(1)], r[hour(2)], r[hour(3)], r[hour(24)])
		}
	}
	// Half of every message's latest reads (twice its id) was there at its
	// first snapshot: reached by 2 hours, no age below to bound it.
	cols, rows = run("Fastest and slowest messages by hours to half")
	if len(rows) != 16 {
		t.Errorf("speed panel: %d rows, want 8 fastest and 8 slowest", len(rows))
	}
	lo, hi := slices.Index(cols, "half_after_hours_min"), slices.Index(cols, "half_after_hours_max")
	for _, r := range rows {
		if r[lo] != "" || r[hi] != "2" {
			t.Errorf("speed panel, %v: half after %q to %q hours, want none to 2", r, r[lo], r[hi])
		}
	}

	// A newer message, seen half an hour after its creation and every
	// hour after for seven hours with 1, 4, 9, 16, 25, 36, then 30 reads:
	// it comes first, with the reads it gained in each hour, counted from
	// none at its creation, a loss included; nothing said past 7 hours.
	created := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	for k, reads := range []uint64{1, 4, 9, 16, 25, 36, 30} {
		at := sink.TimeOf(created.Add(time.Duration(k)*time.Hour + 30*time.Minute))
		v := uint64(1000 + k)
		if err := ch.Write(context.Background(), &sink.Batch{Schedule: "hourly",
			Messages:  []sink.Message{{ProjectID: 1, ID: 19, Subject: "message 19", CreateAt: sink.TimeOf(created), FetchedAt: at, Version: v}},
			Snapshots: []sink.Snapshot{{ProjectID: 1, MessageID: 19, SnapshotAt: at, FetchedAt: at, ReadCount: reads, Total: 100, Percent: float64(reads), Version: v}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	vars = dashboardVariables(t, conn, d) // as Grafana refreshes them with the time range
	cols, rows = run("First 24 hours of the latest messages")
	if len(rows) != 9 || rows[0][subject] != "message 19" {
		t.Fatalf("first-day panel: %d messages, the first %v; want 9, message 19 first", len(rows), rows[0])
	}
	want := []string{"1", "3", "5", "7", "9", "11", "-6"}
	for h := 1; h <= 24; h++ {
		w := ""
		if h <= len(want) {
			w = want[h-1]
		}
		if got := rows[0][hour(h)]; got != w {
			t.Errorf("first-day panel, message 19: h%d %q, want %q", h, got, w)
		}
	}

}
