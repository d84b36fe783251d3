package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/readsync/readsync/scripts/internal/benchdb"
)

// Credentials the fake accepts and readsync sends; any pair would do.
const (
	benchClientID     = "bench"
	benchClientSecret = "bench-secret"
)

// result is what one workload's run measured.
type result struct {
	workload
	wall time.Duration
	// cpu and maxRSS are the readsync process's own, from its rusage.
	cpu    time.Duration
	maxRSS int64 // bytes
	exit   int
	// rows and snapshots are counted in ClickHouse after the run.
	rows      uint64
	snapshots uint64
	// inserts is the growth of InsertQuery in system.events over the run;
	// blocks is how many blocks the bench database's tables received, which
	// equals inserts unless another client wrote to the server meanwhile.
	inserts uint64
	blocks  uint64
	fakeCPU time.Duration
	logPath string
}

// ownInserts is the INSERT count of this run alone: the server-wide count
// unless it exceeds the blocks the bench database received, which means
// another client was inserting into the same server.
func (r result) ownInserts() uint64 {
	if r.blocks > 0 && r.blocks < r.inserts {
		return r.blocks
	}
	return r.inserts
}

// complete reports whether the run exited cleanly and wrote every snapshot.
func (r result) complete() bool { return r.exit == 0 && r.snapshots == r.workload.snapshots() }

// runWorkload serves w from a fresh fake upstream, runs one backfill of all
// its names into a freshly dropped database, and measures it.
func runWorkload(ctx context.Context, o options, w workload, ch *clickHouse) (result, error) {
	dir, err := filepath.Abs(filepath.Join(o.work, w.key))
	if err != nil {
		return result{}, fmt.Errorf("work directory: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return result{}, fmt.Errorf("empty work directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{}, fmt.Errorf("create work directory: %w", err)
	}
	schedules := filepath.Join(dir, "schedules.yaml")
	if err := writeSchedules(ctx, o, w, schedules); err != nil {
		return result{}, err
	}
	if err := ch.exec(ctx, "DROP DATABASE IF EXISTS "+o.database); err != nil {
		return result{}, err
	}
	dsn, err := benchdb.DatabaseDSN(o.dsn, o.database)
	if err != nil {
		return result{}, err
	}

	fake, err := startFake(ctx, o, w, dir)
	if err != nil {
		return result{}, err
	}
	defer fake.stop()

	before, err := ch.insertQueries(ctx)
	if err != nil {
		return result{}, err
	}
	r := result{workload: w}
	env := readsyncEnv(o, fake.url, dsn, schedules, dir)
	if err := runReadsync(ctx, o, env, dir, &r, "--backfill"); err != nil {
		return r, err
	}
	after, err := ch.insertQueries(ctx)
	if err != nil {
		return r, err
	}
	r.inserts = after - before
	if err := ch.count(ctx, o.database, &r); err != nil {
		if r.exit != 0 {
			return r, fmt.Errorf("readsync exited %d and left nothing to count (%w): %s", r.exit, err, tail(r.logPath))
		}
		return r, err
	}
	r.fakeCPU = fake.stop()
	return r, nil
}

// writeSchedules writes one schedule holding every name the fake serves,
// as the fake itself lists them.
func writeSchedules(ctx context.Context, o options, w workload, path string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(o.bin, "fakeupstream"), fakeDataFlags(o, w, "-print-nft-names")...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("list the fake's nft names: %w", err)
	}
	names := strings.Fields(string(out))
	if len(names) != w.names {
		return fmt.Errorf("the fake lists %d nft names, want %d", len(names), w.names)
	}
	var b bytes.Buffer
	b.WriteString("schedules:\n  - name: bench\n    cron: \"@hourly\"\n    nft_names:\n")
	for _, n := range names {
		// A JSON string is a valid YAML double-quoted scalar, whatever the name holds.
		q, err := json.Marshal(n)
		if err != nil {
			return fmt.Errorf("quote nft name %q: %w", n, err)
		}
		fmt.Fprintf(&b, "      - %s\n", q)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write schedules file: %w", err)
	}
	return nil
}

func fakeDataFlags(o options, w workload, extra ...string) []string {
	return append([]string{
		"-names", strconv.Itoa(w.names),
		"-messages", strconv.Itoa(w.messages),
		"-seed", strconv.FormatInt(o.seed, 10),
	}, extra...)
}

// fakeUpstream is a running bin/fakeupstream.
type fakeUpstream struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed once the process has been waited for
}

// fakeStartTimeout bounds generating the data set and starting to listen.
const fakeStartTimeout = 5 * time.Minute

func startFake(ctx context.Context, o options, w workload, dir string) (*fakeUpstream, error) {
	urlFile := filepath.Join(dir, "fakeupstream.url")
	logFile, err := os.Create(filepath.Join(dir, "fakeupstream.log"))
	if err != nil {
		return nil, fmt.Errorf("create fake upstream log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(filepath.Join(o.bin, "fakeupstream"), fakeDataFlags(o, w,
		"-latency", o.latency.String(),
		"-client-id", benchClientID,
		"-client-secret", benchClientSecret,
		"-url-file", urlFile)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fake upstream: %w", err)
	}
	f := &fakeUpstream{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState in stop
		close(f.done)
	}()

	deadline := time.After(fakeStartTimeout)
	for {
		if b, err := os.ReadFile(urlFile); err == nil {
			f.url = strings.TrimSpace(string(b))
			return f, nil
		}
		select {
		case <-f.done:
			return nil, fmt.Errorf("fake upstream exited before listening (%s); see %s", cmd.ProcessState, logFile.Name())
		case <-ctx.Done():
			f.stop()
			return nil, fmt.Errorf("wait for the fake upstream: %w", ctx.Err())
		case <-deadline:
			f.stop()
			return nil, fmt.Errorf("fake upstream did not listen within %s; see %s", fakeStartTimeout, logFile.Name())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop ends the fake, if it still runs, and returns the CPU it used. It may
// be called more than once.
func (f *fakeUpstream) stop() time.Duration {
	select {
	case <-f.done:
	default:
		_ = f.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-f.done:
		case <-time.After(10 * time.Second):
			_ = f.cmd.Process.Kill()
			<-f.done
		}
	}
	ps := f.cmd.ProcessState
	return ps.UserTime() + ps.SystemTime()
}

// readsyncEnv is the environment of the measured run: the caller's, minus
// any READSYNC_ variable that could change what is measured, plus the
// workload's settings.
func readsyncEnv(o options, url, dsn, schedules, dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "READSYNC_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"READSYNC_API_BASE_URL="+url,
		"READSYNC_CLIENT_ID="+benchClientID,
		"READSYNC_CLIENT_SECRET="+benchClientSecret,
		"READSYNC_CLICKHOUSE_DSN="+dsn,
		"READSYNC_SCHEDULES_FILE="+schedules,
		"READSYNC_CONCURRENCY="+strconv.Itoa(o.concurrency),
		"READSYNC_BATCH_ROWS="+strconv.Itoa(o.batchRows),
		// The bench measures readsync, not the process-wide rate limiter,
		// which would hold 4000 requests at 20 per second for 200 s.
		"READSYNC_RATE_LIMIT=0",
		"READSYNC_SPOOL_DIR="+filepath.Join(dir, "spool"),
		"READSYNC_LOG_FORMAT=json",
		"READSYNC_LOG_LEVEL=warn",
	)
}

// runReadsync runs readsync with args (a backfill) as a child process,
// its standard output discarded, and records its wall time, CPU time,
// peak RSS and exit code in r. A run that exits 1 (names failed) is a
// result to show; one that cannot start or exits 2 (bad configuration) is
// an error.
func runReadsync(ctx context.Context, o options, env []string, dir string, r *result, args ...string) error {
	r.logPath = filepath.Join(dir, "readsync.log")
	logFile, err := os.Create(r.logPath)
	if err != nil {
		return fmt.Errorf("create readsync log: %w", err)
	}
	defer logFile.Close()

	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(o.bin, "readsync"), args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if slices.Contains(args, "--dry-run") {
		cmd.Stdout = io.Discard // the rows, as JSON lines
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start readsync: %w", err)
	}
	err = cmd.Wait()
	r.wall = time.Since(start)
	if ctx.Err() != nil {
		return fmt.Errorf("readsync %s did not finish within %s (see %s): %w", strings.Join(args, " "), o.timeout, r.logPath, ctx.Err())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return fmt.Errorf("run readsync: %w", err)
	}
	ps := cmd.ProcessState
	r.exit = ps.ExitCode()
	if r.exit == 2 {
		return fmt.Errorf("readsync rejected its configuration: %s", tail(r.logPath))
	}
	r.cpu = ps.UserTime() + ps.SystemTime()
	r.maxRSS = maxRSS(ps)
	return nil
}

// maxRSS is the peak resident set of the process, from its rusage alone:
// wait4 reports the child's own peak, not the parent's or the fake's.
func maxRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return ru.Maxrss // bytes there, KiB on Linux
	}
	return ru.Maxrss << 10
}

// tail returns the last lines of a log file, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(log %s unreadable: %v)", path, err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}
