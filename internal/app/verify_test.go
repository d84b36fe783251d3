package app

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
)

// --verify prints a line per view and exits 0 on a database readsync
// wrote; a row written into a rollup by hand makes it name the view and the
// row and exit 1; --verify --repair mends it and exits 0; --since narrows
// the window to the days from its day on and what was written since.
func TestVerifyFlag(t *testing.T) {
	projects := apitest.Generate(4, 5, 31)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...), apitest.WithReadGrowth(3))
	for _, at := range []string{"2026-03-01T08:00:00Z", "2026-03-01T12:00:00Z", "2026-03-02T08:00:00Z"} {
		if code, _, stderr := f.run(t, "--backfill", "--snapshot-at", at); code != ExitOK {
			t.Fatalf("backfill at %s: exit %d\n%s", at, code, stderr)
		}
	}
	code, stdout, stderr := f.run(t, "--verify")
	if code != ExitOK {
		t.Fatalf("--verify: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"verify: every view against its brute force over the whole history\n", "message_read_latest: ok (20 rows)\n",
		"project_read_daily: ok (8 rows)\n", "project_read_snapshots: ok (12 rows)\n", "project_read_gains: ok (12 rows)\n",
		"project_read_daily_gains: ok (8 rows)\n", "verify: ok: 12 views equal their brute force\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--verify prints no %q:\n%s", want, stdout)
		}
	}

	// The second day's row of one project, missing from the day rollup.
	p := projects[1].ID
	f.DeleteRows(t, "project_read_day_rollup", fmt.Sprintf("project_id = %d AND day = toDate('2026-03-02')", p))
	code, stdout, _ = f.run(t, "--verify")
	if want := fmt.Sprintf("  missing project_id=%d day=2026-03-02: want nft=", p); code != ExitFailed || !strings.Contains(stdout, want) ||
		!strings.Contains(stdout, "project_read_daily: DIFFERS: 1 rows missing, 0 extra, 0 wrong (of 8)") {
		t.Errorf("--verify after a row went missing: exit %d, want %d and %q:\n%s", code, ExitFailed, want, stdout)
	}
	// Taken before a later day but written since, the row is in its
	// window.
	code, stdout, _ = f.run(t, "--verify", "--since", "2026-03-03")
	if code != ExitFailed || !strings.Contains(stdout, "from 2026-03-03 (UTC) on\n") ||
		!strings.Contains(stdout, "verify: and over what was written since then, taken before: 12 project snapshots and 0 cron ticks, with every row of their 4 projects from 2026-03-01 (UTC) on\n") {
		t.Errorf("--verify --since a later day, the history written since: exit %d, want %d:\n%s", code, ExitFailed, stdout)
	}
	// Outside the window, taken and written before it, the row is not
	// compared: its project's rows of the change logs gone, as when their
	// month's partition is dropped.
	f.DeleteRows(t, "snapshot_changes", fmt.Sprintf("project_id = %d", p))
	if code, stdout, _ := f.run(t, "--verify", "--since", "2026-03-03"); code != ExitOK || !strings.Contains(stdout, "9 project snapshots") {
		t.Errorf("--verify --since a later day, the row written before: exit %d:\n%s", code, stdout)
	}
	code, stdout, stderr = f.run(t, "--verify", "--repair")
	if code != ExitOK || !strings.Contains(stdout, "repair: rebuilt the derived rows of 1 projects") ||
		!strings.HasSuffix(stdout, "verify: ok: 12 views equal their brute force\n") {
		t.Errorf("--verify --repair: exit %d:\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := f.run(t, "--verify", "--since", time.Now().Add(-time.Hour).Format(time.RFC3339)); code != ExitOK {
		t.Errorf("--verify --since an hour ago: exit %d:\n%s", code, stdout)
	}
}

// --verify --since checks what was written since, whatever its time: the
// snapshots of a backfill taken ten days ago and written now are in the
// window of --since 48h, with their derived rows.
func TestVerifySinceChecksWhatWasWrittenSince(t *testing.T) {
	projects := apitest.Generate(3, 4, 17)
	f := newFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...), apitest.WithReadGrowth(3))
	day := time.Now().UTC().AddDate(0, 0, -10).Truncate(24 * time.Hour)
	for _, hour := range []time.Duration{8, 12} {
		if code, _, stderr := f.run(t, "--backfill", "--snapshot-at", day.Add(hour*time.Hour).Format(time.RFC3339)); code != ExitOK {
			t.Fatalf("backfill at %s: exit %d\n%s", day.Add(hour*time.Hour), code, stderr)
		}
	}
	code, stdout, stderr := f.run(t, "--verify", "--since", "48h")
	if want := fmt.Sprintf("6 project snapshots and 0 cron ticks, with every row of their 3 projects from %s (UTC) on", day.Format(time.DateOnly)); code != ExitOK ||
		!strings.Contains(stdout, want) || !strings.Contains(stdout, "project_read_gains: ok (6 rows)") {
		t.Fatalf("--verify --since 48h: exit %d, want %d and %q:\n%s%s", code, ExitOK, want, stdout, stderr)
	}

	// The derived rows of one project's snapshots, lost.
	p := projects[1].ID
	f.DeleteRows(t, "project_read_day_rollup", fmt.Sprintf("project_id = %d", p))
	f.DeleteRows(t, "project_read_gain_rollup", fmt.Sprintf("project_id = %d", p))
	code, stdout, _ = f.run(t, "--verify", "--since", "48h")
	for _, want := range []string{
		fmt.Sprintf("  missing project_id=%d day=%s: want nft=", p, day.Format(time.DateOnly)),
		fmt.Sprintf("  missing project_id=%d snapshot_at=%s: want nft=", p, day.Add(12*time.Hour).Format(time.RFC3339)),
		"project_read_gains: DIFFERS: 2 rows missing, 0 extra, 0 wrong (of 6)",
	} {
		if code != ExitFailed || !strings.Contains(stdout, want) {
			t.Errorf("--verify --since 48h after derived rows went missing: exit %d, want %d and %q:\n%s", code, ExitFailed, want, stdout)
		}
	}
}
