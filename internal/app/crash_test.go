package app

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/sink/sinktest"
)

// envCrashSeed, set, makes the crash campaign replay the rounds of that
// seed, which a failure prints.
const envCrashSeed = "READSYNC_TEST_CRASH_SEED"

// The crash campaign: rounds of backfills (now, in the past, of a few
// names) and daemons, each readsync a process of its own killed with
// SIGKILL at a random instant, as the OOM killer, a node loss or `kubectl
// delete pod --force` would; then one clean pass, after which every view
// must equal its brute force. Batches are small and time out fast, so a
// pass makes many INSERTs and refreshes for a kill to fall between.
//
// On a server that aborts when a killed client resets its connection
// (chDB's build of the current release), readsync reaches it through a
// proxy that hangs up in the client's place.
func TestCrashCampaign(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envCrashSeed); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envCrashSeed, s, err)
		}
	}
	t.Logf("crash campaign seed %d (%s=%d replays it)", seed, envCrashSeed, seed)
	rnd := rand.New(rand.NewPCG(seed, seed))

	projects := apitest.Generate(24, 12, int64(seed%1000))
	for i := range projects {
		// Lists from one message to a long one, whose snapshot rows wait
		// on disk until it is whole (64 rows are staged with batches of
		// 200).
		projects[i].Messages = projects[i].Messages[:1+rnd.IntN(len(projects[i].Messages))]
	}
	long := apitest.Generate(1, 300, int64(seed%1000)+1)[0]
	long.ID, long.NFT = 1_000_000, "long.dmail"
	projects = append(projects, long)
	names := apptest.NamesOf(projects)
	f := newFixture(t, names, apitest.WithProjects(projects...), apitest.WithReadGrowth(3), apitest.WithLatency(2*time.Millisecond))
	if sinktest.Lacks(sinktest.SurvivesKilledClient) {
		f.Env["READSYNC_CLICKHOUSE_DSN"] = f.DB.NewProxy(t).DSN
	}
	f.WriteSchedules(t, "fast", "@every 2s", names)
	f.Env["READSYNC_BATCH_ROWS"] = "200"
	f.Env["READSYNC_BATCH_TIMEOUT"] = "150ms"
	f.Env["READSYNC_CONCURRENCY"] = "4"
	f.Env["READSYNC_LOG_LEVEL"] = "info"
	f.Env["READSYNC_LOG_FORMAT"] = "json"

	// The schema first, as docs/operations.md says to on an upgrade: a kill in
	// the middle of a migration leaves its lock to a lease of minutes.
	if code, _, stderr := f.run(t, "--migrate"); code != ExitOK {
		t.Fatalf("--migrate: exit %d\n%s", code, stderr)
	}
	// How long a whole backfill takes on this server and machine: the
	// kills fall within it, so that most land in the middle of a pass
	// whatever the server's speed. The shorter of the first two: the
	// first computes every message's speed from its curve, and the rounds
	// write over a history, as the second does.
	var pass time.Duration
	for i := range 2 {
		start := time.Now()
		if code, _, stderr := f.run(t, "--backfill"); code != ExitOK {
			t.Fatalf("backfill %d: exit %d\n%s", i+1, code, stderr)
		}
		if d := time.Since(start); i == 0 || d < pass {
			pass = d
		}
	}
	t.Logf("a whole backfill took %s", pass.Round(time.Millisecond))

	past := []string{"2026-03-01T00:00:00Z", "2026-03-01T06:00:00Z", "2026-03-01T12:00:00Z", "2026-03-02T00:00:00Z"}
	var killed, rounds int
	for round := range 30 {
		var args []string
		wait := time.Duration(rnd.Int64N(int64(pass)))
		switch kind := rnd.IntN(4); kind {
		case 0:
			args = []string{"--backfill"}
		case 1:
			args = []string{"--backfill", "--snapshot-at", past[rnd.IntN(len(past))]}
		case 2:
			args = []string{"--backfill", "--nft", strings.Join(names[:1+rnd.IntN(4)], ",")}
		default:
			wait = time.Duration(rnd.Int64N(int64(5 * time.Second)))
		}
		rounds++
		if f.killAfter(t, wait, args...) {
			killed++
		}
		t.Logf("round %d: readsync %s, SIGKILL after %s", round, strings.Join(args, " "), wait.Round(time.Millisecond))
	}
	t.Logf("%d of %d rounds were killed while running", killed, rounds)
	if killed < rounds/2 {
		t.Errorf("seed %d: only %d of %d rounds were still running when killed: the campaign kills too late to matter", seed, killed, rounds)
	}

	// What the kills left, for the log: the clean pass must mend it.
	_, before, _ := f.run(t, "--verify")
	t.Logf("before the clean pass:\n%s", before)
	if code, _, stderr := f.run(t, "--backfill"); code != ExitOK {
		t.Fatalf("seed %d: the clean pass: exit %d\n%s", seed, code, stderr)
	}
	code, stdout, stderr := f.run(t, "--verify")
	if code != ExitOK {
		t.Errorf("seed %d: --verify after the campaign and one clean pass: exit %d\n%s%s", seed, code, stdout, stderr)
	}
}

// killAfter runs readsync with args as a process of its own and sends it
// SIGKILL after wait, or lets it finish; it reports whether it killed it.
func (f *fixture) killAfter(t *testing.T, wait time.Duration, args ...string) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{apptest.RunsReadsync + "=1", "PATH=" + os.Getenv("PATH"), "TMPDIR=" + t.TempDir()}
	for k, v := range f.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		// A backfill can finish first; exit 1 is a name the fake made
		// fail, 3 rows spooled: neither is the test's concern here.
		if err != nil && cmd.ProcessState.ExitCode() > 3 {
			t.Errorf("readsync %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return false
	case <-time.After(wait):
	}
	_ = cmd.Process.Kill()
	<-done
	f.NoSecrets(t, out.String())
	return true
}
