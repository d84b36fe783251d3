package progress_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/internal/progress"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// report is a pass of 6 names: 2 synced, one failed for a cause of its own,
// three not registered.
func report() sync.Report {
	failed := []sync.NameError{{NFT: "broken.eth", Err: errors.New("HTTP 500")}}
	for _, n := range []string{"c.eth", "a.eth", "b.eth"} {
		failed = append(failed, sync.NameError{NFT: n, Err: fmt.Errorf("details: %w", apiclient.ErrNotRegistered)})
	}
	return sync.Report{Run: sink.Run{NFTTotal: 6, NFTOK: 2, NFTFailed: 4}, Failed: failed, Rows: 40, Spooled: 3}
}

// Off a terminal, the summary is log lines: the counts, then each name
// that failed for a cause of its own, then each cause shared, once.
func TestSummaryOffTerminal(t *testing.T) {
	var log, out bytes.Buffer
	p := progress.New(slog.New(slog.NewTextHandler(&log, nil)), &out, false, 6)
	p.Update(sync.Progress{NamesTotal: 6, NamesDone: 6, NamesFailed: 4, Rows: 40})
	p.Close()
	p.Run() // returns at once: closed
	p.Finish(report())
	if out.Len() != 0 {
		t.Errorf("wrote to the stream off a terminal: %q", out.String())
	}
	for _, want := range []string{
		`msg="backfill summary" names_synced=2 names_failed=4 rows_written=40 rows_spooled=3`,
		`msg="backfill name failed" nft=broken.eth err="HTTP 500"`,
		`msg="backfill names failed" names=3 nfts="[a.eth b.eth c.eth]"`,
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, log.String())
		}
	}
}

// On a terminal, the summary is printed for a person: one line of counts,
// one per failure.
func TestSummaryOnTerminal(t *testing.T) {
	var log, out bytes.Buffer
	p := progress.New(slog.New(slog.NewTextHandler(&log, nil)), &out, true, 6)
	p.Update(sync.Progress{NamesTotal: 6, NamesDone: 3, Rows: 20})
	p.Update(sync.Progress{NamesTotal: 6, NamesDone: 2, Rows: 10}) // late: ignored
	p.Close()
	p.Run()
	p.Finish(report())
	if log.Len() != 0 {
		t.Errorf("logged on a terminal: %s", log.String())
	}
	for _, want := range []string{
		"backfill: 2 of 6 names synced, 4 failed; 40 rows written, 3 spooled;",
		`  failed "broken.eth": HTTP 500`,
		`  failed "a.eth", "b.eth", "c.eth": `,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
