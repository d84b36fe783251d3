package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
)

// --verify prints a line per view and exits 0 on a database readsync
// wrote; a row written into a rollup by hand makes it name the view and the
// row and exit 1; --verify --repair mends it and exits 0; --since narrows
// the window to the days from its day on.
func TestVerifyFlag(t *testing.T) {
	projects := apitest.Generate(4, 5, 31)
	f := newFixture(t, namesOf(projects), apitest.WithProjects(projects...), apitest.WithReadGrowth(3))
	for _, at := range []string{"2026-03-01T08:00:00Z", "2026-03-01T12:00:00Z", "2026-03-02T08:00:00Z"} {
		if code, _, stderr := f.run(t, "--backfill", "--snapshot-at", at); code != exitOK {
			t.Fatalf("backfill at %s: exit %d\n%s", at, code, stderr)
		}
	}
	code, stdout, stderr := f.run(t, "--verify")
	if code != exitOK {
		t.Fatalf("--verify: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"verify: every view against its brute force over the whole history\n", "message_read_latest: ok (20 rows)\n",
		"project_read_daily: ok (8 rows)\n", "project_read_snapshots: ok (12 rows)\n", "project_read_gains: ok (12 rows)\n",
		"project_read_daily_gains: ok (8 rows)\n", "verify: ok: 6 views equal their brute force\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--verify prints no %q:\n%s", want, stdout)
		}
	}

	// The second day's row of one project, missing from the day rollup.
	p := projects[1].ID
	f.deleteRows(t, "project_read_day_rollup", fmt.Sprintf("project_id = %d AND day = toDate('2026-03-02')", p))
	code, stdout, _ = f.run(t, "--verify")
	if want := fmt.Sprintf("  missing project_id=%d day=2026-03-02: want nft=", p); code != exitFailed || !strings.Contains(stdout, want) ||
		!strings.Contains(stdout, "project_read_daily: DIFFERS: 1 rows missing, 0 extra, 0 wrong (of 8)") {
		t.Errorf("--verify after a row went missing: exit %d, want %d and %q:\n%s", code, exitFailed, want, stdout)
	}
	// Outside the window, the row is not compared.
	if code, stdout, _ := f.run(t, "--verify", "--since", "2026-03-03"); code != exitOK || !strings.Contains(stdout, "from 2026-03-03 (UTC) on") {
		t.Errorf("--verify --since a later day: exit %d:\n%s", code, stdout)
	}
	code, stdout, stderr = f.run(t, "--verify", "--repair")
	if code != exitOK || !strings.Contains(stdout, "repair: rebuilt the derived rows of 1 projects") ||
		!strings.HasSuffix(stdout, "verify: ok: 6 views equal their brute force\n") {
		t.Errorf("--verify --repair: exit %d:\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := f.run(t, "--verify", "--since", time.Now().Add(-time.Hour).Format(time.RFC3339)); code != exitOK {
		t.Errorf("--verify --since an hour ago: exit %d:\n%s", code, stdout)
	}
}

// deleteRows deletes the rows of one of the fixture's tables that match
// where, as an operator's mistake or a lost write would, and waits until
// the deletion is done.
func (f *fixture) deleteRows(t *testing.T, table, where string) {
	t.Helper()
	if err := f.db.Conn.Exec(context.Background(), fmt.Sprintf("ALTER TABLE %s DELETE WHERE %s", f.db.Table(table), where)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion from "+table, func() bool {
		var n uint64
		f.query(t, fmt.Sprintf("SELECT count() FROM system.mutations WHERE database = '%s' AND is_done = 0", f.db.Name), &n)
		return n == 0
	}, func() string { return "" })
}
