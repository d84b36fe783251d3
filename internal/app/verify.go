package app

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/verify"
)

// verifyShown is how many rows of each kind of difference --verify prints
// per view; the counts say how many more there are.
const verifyShown = 20

// verify is --verify: it compares every view with its brute force over the
// stored history from since on and what was written since then (the whole
// history for the zero time),
// prints one line per view and the rows that differ, and exits 0 when none
// does, 1 otherwise. With repair it rebuilds the derived rows of the
// projects that differ and verifies again, and exits by that.
func (a *app) verify(ctx context.Context, since time.Time, repair bool) int {
	ch, err := a.openClickHouse(ctx)
	if err != nil {
		return a.configFailed(fmt.Errorf("READSYNC_CLICKHOUSE_DSN: %w", err))
	}
	defer ch.Close()
	rep, err := ch.Verify(ctx, since)
	if err != nil {
		fmt.Fprintf(a.stderr, "readsync: verify: %s\n", sink.Describe(err))
		return ExitFailed
	}
	printVerify(a.stdout, rep)
	if rep.Clean() {
		return ExitOK
	}
	if !repair {
		fmt.Fprintln(a.stdout, "verify: `readsync --verify --repair` rebuilds the derived rows of the projects named above")
		return ExitFailed
	}
	start := time.Now()
	if err := ch.Repair(ctx, rep); err != nil {
		fmt.Fprintf(a.stderr, "readsync: repair: %s\n", sink.Describe(err))
		return ExitFailed
	}
	fmt.Fprintf(a.stdout, "repair: rebuilt the derived rows of %d projects in %s; verifying again\n", len(repairedProjects(rep)), time.Since(start).Round(time.Millisecond))
	if rep, err = ch.Verify(ctx, since); err != nil {
		fmt.Fprintf(a.stderr, "readsync: verify: %s\n", sink.Describe(err))
		return ExitFailed
	}
	printVerify(a.stdout, rep)
	if !rep.Clean() {
		return ExitFailed
	}
	return ExitOK
}

// printVerify writes a verification: its window, a line per view, the
// rows that differ under it, and a summary.
func printVerify(w io.Writer, rep verify.Report) {
	window := "the whole history"
	if !rep.Since.IsZero() && rep.Since.Unix() > 0 {
		window = "the snapshots and days from " + rep.Since.Format(time.DateOnly) + " (UTC) on"
	}
	fmt.Fprintf(w, "verify: every view against its brute force over %s\n", window)
	if !rep.Expired.IsZero() {
		fmt.Fprintf(w, "verify: skipped what expired: raw rows before %s are gone (READSYNC_RETAIN_RAW), so the days before %s (UTC) are taken as the views hold them, "+
			"and so are the reads gained of %d project snapshots (and their days) whose previous snapshot expired\n",
			rep.Expired.Format(time.RFC3339), rep.Since.Format(time.DateOnly), rep.Given)
	}
	if rep.Written > 0 || rep.Ticks > 0 {
		fmt.Fprintf(w, "verify: and over what was written since then, taken before: %d project snapshots and %d cron ticks", rep.Written, rep.Ticks)
		if rep.Earlier > 0 {
			fmt.Fprintf(w, ", with every row of their %d projects from %s (UTC) on", rep.Earlier, rep.EarlierFrom.Format(time.DateOnly))
		}
		fmt.Fprintln(w)
	}
	differ := 0
	for _, v := range rep.Views {
		if !v.Differs() {
			fmt.Fprintf(w, "%s: ok (%d rows)\n", v.View, v.Rows)
			continue
		}
		differ++
		fmt.Fprintf(w, "%s: DIFFERS: %d rows missing, %d extra, %d wrong (of %d)\n", v.View, v.MissingRows, v.ExtraRows, v.WrongRows, v.Rows)
		for _, kind := range []struct {
			name string
			rows []verify.RowDiff
			all  int
		}{{"missing", v.Missing, v.MissingRows}, {"extra", v.Extra, v.ExtraRows}, {"wrong", v.Wrong, v.WrongRows}} {
			for i, d := range kind.rows {
				if i == verifyShown {
					fmt.Fprintf(w, "  … and %d more %s\n", kind.all-verifyShown, kind.name)
					break
				}
				switch kind.name {
				case "missing":
					fmt.Fprintf(w, "  missing %s: want %s\n", d.Key, d.Want)
				case "extra":
					fmt.Fprintf(w, "  extra %s: %s\n", d.Key, d.Got)
				default:
					fmt.Fprintf(w, "  wrong %s: %s; want %s\n", d.Key, d.Got, d.Want)
				}
			}
		}
	}
	if differ == 0 {
		fmt.Fprintf(w, "verify: ok: %d views equal their brute force\n", len(rep.Views))
		return
	}
	fmt.Fprintf(w, "verify: %d of %d views differ from their brute force, in %d projects\n", differ, len(rep.Views), len(repairedProjects(rep)))
}

// repairedProjects are the projects with a row that differs.
func repairedProjects(rep verify.Report) map[int64]bool {
	out := map[int64]bool{}
	for _, v := range rep.Views {
		for _, p := range v.Projects {
			out[p] = true
		}
	}
	return out
}
