package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/readsync/readsync/scripts/internal/benchdb"
)

// The name-scale workloads, as the "A million names" issue defines them:
// for each size, one schedule whose names the fake serves are listed in
// an nft_names_file, two messages a name, no upstream latency; a backfill
// writing to ClickHouse and a backfill --dry-run, each a child process
// whose peak RSS and wall time the table shows against the names.

// nameScaleTarget is the bound on peak RSS, by names.
func nameScaleTarget(names int) float64 {
	switch {
	case names <= 100_000:
		return 96
	case names <= 1_000_000:
		return 256
	}
	return 0
}

// runNameScale runs the name-scale workloads of o.nameSizes and prints
// their table.
func runNameScale(ctx context.Context, o options, ch *clickHouse, stdout, stderr io.Writer) error {
	type row struct {
		names   int
		mode    string
		r       result
		namesPS float64
	}
	var rows []row
	o.timeout = max(o.timeout, nameScaleTimeout)
	for _, n := range o.nameSizes {
		w := workload{key: fmt.Sprintf("names-%d", n), names: n, messages: 2}
		dir, err := filepath.Abs(filepath.Join(o.work, w.key))
		if err != nil {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		schedules := filepath.Join(dir, "schedules.yaml")
		if err := writeNamesFile(ctx, o, w, dir, schedules); err != nil {
			return err
		}
		fake, err := startFake(ctx, options{bin: o.bin, seed: o.seed}, w, dir)
		if err != nil {
			return err
		}
		dsn, err := benchdb.DatabaseDSN(o.dsn, o.database)
		if err != nil {
			fake.stop()
			return err
		}
		for _, mode := range []string{"writing", "dry run"} {
			fmt.Fprintf(stderr, "bench: %d names, %s …\n", n, mode)
			if err := ch.exec(ctx, "DROP DATABASE IF EXISTS "+o.database); err != nil {
				fake.stop()
				return err
			}
			args := []string{"--backfill"}
			if mode == "dry run" {
				args = append(args, "--dry-run")
			}
			r := result{workload: w}
			env := readsyncEnv(o, fake.url, dsn, schedules, dir)
			if err := runReadsync(ctx, o, env, dir, &r, args...); err != nil {
				fake.stop()
				return err
			}
			if r.exit != 0 {
				fake.stop()
				return fmt.Errorf("%d names, %s: readsync exited %d: %s", n, mode, r.exit, tail(r.logPath))
			}
			rows = append(rows, row{names: n, mode: mode, r: r, namesPS: float64(n) / r.wall.Seconds()})
		}
		fake.stop()
	}
	fmt.Fprintf(stdout, "Names from an nft_names_file, 2 messages a name, no upstream latency, concurrency %d:\n\n", o.concurrency)
	fmt.Fprintf(stdout, "%10s  %-8s %10s %10s %14s %12s\n", "names", "mode", "wall s", "names/s", "peak RSS MiB", "target MiB")
	for _, r := range rows {
		rss := float64(r.r.maxRSS) / (1 << 20)
		target, verdict := nameScaleTarget(r.names), ""
		if target > 0 {
			verdict = fmt.Sprintf("≤ %.0f %s", target, map[bool]string{true: "met", false: "missed"}[rss <= target])
		}
		fmt.Fprintf(stdout, "%10d  %-8s %10.1f %10.0f %14.1f %12s\n", r.names, r.mode, r.r.wall.Seconds(), r.namesPS, rss, verdict)
	}
	return nil
}

// writeNamesFile lists the names the fake serves in names.txt, one a line,
// and a schedules file whose one schedule reads them from it.
func writeNamesFile(ctx context.Context, o options, w workload, dir, schedules string) error {
	f, err := os.Create(filepath.Join(dir, "names.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(o.bin, "fakeupstream"), fakeDataFlags(o, w, "-print-nft-names")...)
	cmd.Stdout, cmd.Stderr = f, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("list the fake's nft names: %w", err)
	}
	doc := "schedules:\n  - name: bench\n    cron: \"@hourly\"\n    nft_names_file: names.txt\n"
	return os.WriteFile(schedules, []byte(doc), 0o644)
}

// parseSizes reads a comma-separated list of name counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-name-sizes %q: want positive counts separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// nameScaleTimeout bounds one run of the largest sizes.
const nameScaleTimeout = 30 * time.Minute
