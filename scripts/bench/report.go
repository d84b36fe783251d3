package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// environment is what a reader needs to compare numbers across machines.
type environment struct {
	cpu        string
	cores      int
	clickHouse string
	readsync   string
}

func describeEnvironment(ctx context.Context, o options, ch *clickHouse) (environment, error) {
	e := environment{cpu: cpuModel(), cores: runtime.NumCPU()}
	var err error
	if e.clickHouse, err = ch.version(ctx); err != nil {
		return e, err
	}
	out, err := exec.CommandContext(ctx, filepath.Join(o.bin, "readsync"), "--version").Output()
	if err != nil {
		return e, fmt.Errorf("readsync --version (run make build first): %w", err)
	}
	e.readsync = strings.TrimSpace(string(out))
	return e, nil
}

// cpuModel names the processor from /proc/cpuinfo where there is one.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

const mib = 1 << 20

// printReport prints the settings, the machine, one table row per workload
// with its targets beneath, and what the columns mean.
func printReport(w io.Writer, o options, e environment, rs []result) {
	fmt.Fprintf(w, "readsync bench: latency %s, READSYNC_CONCURRENCY=%d, READSYNC_BATCH_ROWS=%d, rate limit off\n",
		o.latency, o.concurrency, o.batchRows)
	fmt.Fprintf(w, "machine: %s, %d cores, %s/%s; ClickHouse %s; %s\n\n",
		e.cpu, e.cores, runtime.GOOS, runtime.GOARCH, e.clickHouse, e.readsync)

	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\twall s\tideal s\tratio\tcpu s\tpeak RSS MiB\trows/s\tsnapshots\tINSERTs\tresult")
	for _, r := range rs {
		fmt.Fprintln(tw, measuredRow(r))
		fmt.Fprintln(tw, targetRow(r))
	}
	tw.Flush()
	// Padding before an empty last cell would leave trailing blanks in a
	// table that gets pasted into documents.
	for line := range strings.Lines(table.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "wall: the whole readsync --backfill process (start, migrations, pass, run record); ideal: 2·⌈names/concurrency⌉·latency.")
	fmt.Fprintf(w, "cpu s, peak RSS: the readsync process alone (user+sys and maxrss from its rusage); cpu target: %.1f s per %d messages.\n",
		targetCPUSeconds, targetCPUMessages)
	fmt.Fprintln(w, "rows/s: rows of projects, messages and message_read_snapshots per wall second.")
	fmt.Fprintf(w, "INSERTs: growth of InsertQuery in system.events over the run; target: %d per %d rows (one per table per batch, and the refreshes of the days and gains it touched) + %d (sync_runs) + %d (the reconcile after the pass).\n",
		tablesPerBatch, o.batchRows, runRecordInserts, reconcileInserts)
	var fakeCPU time.Duration
	for _, r := range rs {
		fakeCPU += r.fakeCPU
		if r.note != "" {
			fmt.Fprintf(w, "%s: %s.\n", r.label, r.note)
		}
		if r.ownInserts() != r.inserts {
			fmt.Fprintf(w, "%s: the server counted %d INSERTs, the bench database's tables %d (block numbers): another client inserted meanwhile; the target is checked on %[3]d.\n",
				r.label, r.inserts, r.ownInserts())
		}
		if r.exit != 0 {
			fmt.Fprintf(w, "%s: readsync exited %d; see %s\n", r.label, r.exit, r.logPath)
		}
	}
	fmt.Fprintf(w, "The fake upstream, on the same machine, used %.2f CPU s over all runs, not counted above.\n", fakeCPU.Seconds())
}

func measuredRow(r result) string {
	ideal, ratio := "-", "-"
	if r.ideal > 0 {
		ideal = fmt.Sprintf("%.2f", r.ideal.Seconds())
		ratio = fmt.Sprintf("%.2f", r.wall.Seconds()/r.ideal.Seconds())
	}
	snapshots := fmt.Sprint(r.snapshots)
	if r.snapshots != r.workload.snapshots() {
		snapshots = fmt.Sprintf("%d of %d", r.snapshots, r.workload.snapshots())
	}
	return strings.Join([]string{
		r.label,
		fmt.Sprintf("%.2f", r.wall.Seconds()),
		ideal,
		ratio,
		fmt.Sprintf("%.2f", r.cpu.Seconds()),
		fmt.Sprintf("%.1f", float64(r.maxRSS)/mib),
		fmt.Sprintf("%.0f", float64(r.rows)/r.wall.Seconds()),
		snapshots,
		insertsCell(r),
		verdict(r),
	}, "\t")
}

// insertsCell shows the server's count and, when another client inserted
// during the run, the bench database's own count beside it.
func insertsCell(r result) string {
	if r.ownInserts() != r.inserts {
		return fmt.Sprintf("%d (%d ours)", r.inserts, r.ownInserts())
	}
	return fmt.Sprint(r.inserts)
}

func targetRow(r result) string {
	t := r.target
	limit := func(v float64, format string) string {
		if v == 0 {
			return ""
		}
		return "≤ " + fmt.Sprintf(format, v)
	}
	return strings.Join([]string{
		"  target", "", "",
		limit(t.ratio, "%.2f"),
		limit(t.cpuSeconds, "%.2f"),
		limit(t.rssMiB, "%.0f"),
		"",
		fmt.Sprint(r.workload.snapshots()),
		limit(float64(t.inserts), "%.0f"),
		"",
	}, "\t")
}

// verdict says at a glance whether the run met its targets, naming the
// ones it missed.
func verdict(r result) string {
	if !r.complete() {
		return fmt.Sprintf("FAIL: exit %d, %d of %d snapshots", r.exit, r.snapshots, r.workload.snapshots())
	}
	var missed []string
	t := r.target
	if t.ratio > 0 && r.ideal > 0 && r.wall.Seconds()/r.ideal.Seconds() > t.ratio {
		missed = append(missed, "ratio")
	}
	if t.cpuSeconds > 0 && r.cpu.Seconds() > t.cpuSeconds {
		missed = append(missed, "cpu")
	}
	if t.rssMiB > 0 && float64(r.maxRSS)/mib > t.rssMiB {
		missed = append(missed, "RSS")
	}
	if t.inserts > 0 && r.ownInserts() > t.inserts {
		missed = append(missed, "INSERTs")
	}
	if len(missed) == 0 {
		return "met"
	}
	return "missed: " + strings.Join(missed, ", ")
}
