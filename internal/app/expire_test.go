package app

import (
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/sink/sinktest"
)

// --expire drops nothing with no retention set; with one, --dry-run says
// what it would drop and drops nothing, and --expire drops it. A backfill
// stamped before the raw retention is refused, and a retention of a bad
// form is a usage error.
func TestExpireFlag(t *testing.T) {
	t.Parallel()
	good := apitest.Project{ID: 1, NFT: "good.eth", Messages: []apitest.Message{{ID: 1, ReadCount: 1, Total: 2, Percent: "50.00%"}}}
	f := newFixture(t, []string{"good.eth"}, apitest.WithProjects(good))
	now := time.Now().UTC().Truncate(time.Second)
	old, recent := now.Add(-100*24*time.Hour), now.Add(-time.Hour)
	for _, at := range []time.Time{old, recent} {
		if code, _, stderr := f.run(t, "--backfill", "--snapshot-at", at.Format(time.RFC3339)); code != ExitOK {
			t.Fatalf("backfill at %s: exit %d\n%s", at, code, stderr)
		}
	}
	rows := func() string {
		return sinktest.Lines(t, f.DB.Conn, "SELECT toString(count()) FROM "+f.DB.Table("message_read_snapshots"))[0]
	}

	code, stdout, stderr := f.run(t, "--expire")
	if code != ExitOK || !strings.Contains(stdout, "expire: raw rows are kept forever") || !strings.Contains(stdout, "expire: dropped 0 partitions") || rows() != "2" {
		t.Fatalf("--expire with no retention: exit %d, %s rows left\n%s%s", code, rows(), stdout, stderr)
	}

	f.Env["READSYNC_RETAIN_RAW"] = "60d"
	month := old.Format("200601")
	code, stdout, stderr = f.run(t, "--expire", "--dry-run")
	if code != ExitOK || !strings.Contains(stdout, "expire: would drop message_read_snapshots partition "+month+": 1 rows") || rows() != "2" {
		t.Fatalf("--expire --dry-run: exit %d, %s rows left\n%s%s", code, rows(), stdout, stderr)
	}
	code, stdout, stderr = f.run(t, "--expire")
	if code != ExitOK || !strings.Contains(stdout, "expire: dropped message_read_snapshots partition "+month+": 1 rows") || rows() != "1" {
		t.Fatalf("--expire: exit %d, %s rows left\n%s%s", code, rows(), stdout, stderr)
	}

	code, _, stderr = f.run(t, "--backfill", "--snapshot-at", now.Add(-61*24*time.Hour).Format(time.RFC3339))
	if code != ExitConfig || !strings.Contains(stderr, "older than READSYNC_RETAIN_RAW=60d") {
		t.Errorf("backfill before the retention: exit %d, want %d naming the retention\n%s", code, ExitConfig, stderr)
	}
	f.Env["READSYNC_RETAIN_RAW"] = "60 days"
	code, _, stderr = f.run(t, "--expire")
	if code != ExitConfig || !strings.Contains(stderr, `READSYNC_RETAIN_RAW="60 days": a duration such as 90d`) {
		t.Errorf("--expire with a bad retention: exit %d, want %d\n%s", code, ExitConfig, stderr)
	}
	for _, args := range [][]string{{"--expire", "--backfill"}, {"--expire", "--verify"}} {
		if code, _, stderr := f.run(t, args...); code != ExitConfig {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, ExitConfig, stderr)
		}
	}
}
