// Package progress shows a backfill's advance: a bar on a terminal, log
// lines at a steady interval otherwise, and a summary at the end either
// way.
package progress

import (
	"fmt"
	"io"
	"log/slog"
	gosync "sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/readsync/readsync/sync"
)

// Interval is how often a backfill without a terminal logs how far it
// has come.
const Interval = 10 * time.Second

// Progress shows a backfill's advance. Its owner calls Run in a goroutine
// of its own, feeds Update to the pass, and when the pass has returned
// calls Close, waits for Run, and calls Finish.
type Progress struct {
	log   *slog.Logger
	out   io.Writer
	tty   bool
	start time.Time

	mu   gosync.Mutex
	last sync.Progress
	bar  *progressbar.ProgressBar
	stop chan struct{} // closed by Close: Run returns
}

// New is the progress of a backfill of total names: a bar drawn on out
// when tty says it is a terminal, lines logged to log otherwise.
func New(log *slog.Logger, out io.Writer, tty bool, total int) *Progress {
	p := &Progress{log: log, out: out, tty: tty, start: time.Now(),
		last: sync.Progress{NamesTotal: total}, stop: make(chan struct{})}
	if p.tty {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(out),
			progressbar.OptionSetDescription("names"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("names"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

// Update is the pass's Progress callback.
func (p *Progress) Update(pr sync.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr.NamesDone < p.last.NamesDone {
		return // reports from workers can arrive out of order
	}
	p.last = pr
	if p.bar != nil {
		if pr.NamesTotal != p.bar.GetMax() {
			p.bar.ChangeMax(pr.NamesTotal) // repeated names are fetched once
		}
		p.bar.Describe(fmt.Sprintf("names (%d rows, %d failed)", pr.Rows, pr.NamesFailed))
		_ = p.bar.Set(pr.NamesDone)
	}
}

// Run logs how far the backfill has come every Interval until Close,
// when there is no terminal to draw a bar on. The backfill starts it and
// waits for it before Finish.
func (p *Progress) Run() {
	if p.tty {
		return
	}
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			pr := p.last
			p.mu.Unlock()
			elapsed := time.Since(p.start)
			rate := float64(pr.NamesDone) / elapsed.Seconds()
			attrs := []any{"names_done", pr.NamesDone, "names_total", pr.NamesTotal, "names_failed", pr.NamesFailed,
				"rows", pr.Rows, "names_per_second", fmt.Sprintf("%.1f", rate)}
			if rate > 0 {
				eta := time.Duration(float64(pr.NamesTotal-pr.NamesDone) / rate * float64(time.Second))
				attrs = append(attrs, "eta", eta.Round(time.Second).String())
			}
			p.log.Info("backfill progress", attrs...)
		}
	}
}

// Close ends Run.
func (p *Progress) Close() { close(p.stop) }

// Finish ends the bar and prints the summary: names synced and failed,
// each failed one with its cause, rows written and spooled, and the
// duration. Names that share a cause (cut off, or perhaps not registered)
// come in one line with the cause once. It comes after Run has returned,
// so no progress line follows the summary.
func (p *Progress) Finish(rep sync.Report) {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
	d := time.Since(p.start).Round(time.Millisecond)
	r := rep.Run
	own, groups := sync.Grouped(rep.Failed)
	if !p.tty {
		p.log.Info("backfill summary", "names_synced", r.NFTOK, "names_failed", r.NFTFailed, "rows_written", rep.Rows,
			"rows_spooled", rep.Spooled, "duration", d.String())
		for _, f := range own {
			p.log.Error("backfill name failed", "nft", f.NFT, "err", f.Err)
		}
		for _, g := range groups {
			p.log.Error("backfill names failed", "names", len(g.Names), "nfts", summaryNames(g), "err", g.Cause)
		}
		return
	}
	fmt.Fprintf(p.out, "backfill: %d of %d names synced, %d failed; %d rows written, %d spooled; %s\n",
		r.NFTOK, r.NFTTotal, r.NFTFailed, rep.Rows, rep.Spooled, d)
	for _, f := range own {
		fmt.Fprintf(p.out, "  failed %q: %v\n", f.NFT, f.Err)
	}
	for _, g := range groups {
		fmt.Fprintf(p.out, "  failed %s: %s\n", g.List(len(summaryNames(g))), g.Cause)
	}
}

// summaryNames are the names of a group that a summary lists: all of
// those that may not be registered, which are the ones to correct, and a
// few of those cut off, which the next pass asks for again.
func summaryNames(g sync.FailureGroup) []string {
	if g.CutOff {
		return g.Names[:min(len(g.Names), 3)]
	}
	return g.Names
}
