package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// flags are the command-line options; the names are a contract.
type flags struct {
	backfill   bool
	schedule   string
	nft        nftList
	snapshotAt time.Time
	dryRun     bool
	check      bool
	migrate    bool
	version    bool
}

// nftList collects --nft values: comma-separated, and the flag may repeat.
type nftList []string

func (l *nftList) String() string { return strings.Join(*l, ",") }

func (l *nftList) Set(v string) error {
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return errors.New("empty name")
		}
		*l = append(*l, n)
	}
	return nil
}

// snapshotFlag parses --snapshot-at as RFC 3339 in whole seconds.
type snapshotFlag struct{ t *time.Time }

func (s snapshotFlag) String() string {
	if s.t == nil || s.t.IsZero() {
		return ""
	}
	return s.t.Format(time.RFC3339)
}

func (s snapshotFlag) Set(v string) error {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return fmt.Errorf("want RFC 3339 such as 2026-01-01T00:00:00Z: %w", err)
	}
	if t.Nanosecond() != 0 {
		return errors.New("snapshots are stamped in whole seconds; drop the fraction")
	}
	if t.Unix() < 0 || t.Unix() > 1<<32-1 {
		return errors.New("outside what a ClickHouse DateTime holds (1970 to 2106)")
	}
	*s.t = t.UTC()
	return nil
}

const usageText = `Usage: readsync [flags]

With no flag, readsync runs as a daemon: it migrates ClickHouse and runs every
schedule of the schedules file on its cron until SIGTERM or SIGINT.

Flags:
`

// parseFlags parses args. Errors are usage errors: the process exits 2.
func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("readsync", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.BoolVar(&f.backfill, "backfill", false, "run one pass now over all schedules' names, then exit")
	fs.StringVar(&f.schedule, "schedule", "", "with --backfill: only this schedule's names")
	fs.Var(&f.nft, "nft", "with --backfill: exactly these nft names, comma-separated (repeatable)")
	fs.Var(snapshotFlag{&f.snapshotAt}, "snapshot-at", "with --backfill: stamp the pass with this RFC 3339 time (default: the pass start)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "with --backfill: print rows as JSON lines on stdout instead of writing ClickHouse")
	fs.BoolVar(&f.check, "check", false, "validate configuration, reach the API and ClickHouse, report, exit")
	fs.BoolVar(&f.migrate, "migrate", false, "apply pending ClickHouse migrations, then exit (for an init container or a Job)")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return f, f.validate()
}

func (f flags) validate() error {
	if !f.backfill {
		switch {
		case f.schedule != "":
			return errors.New("--schedule needs --backfill")
		case len(f.nft) > 0:
			return errors.New("--nft needs --backfill")
		case !f.snapshotAt.IsZero():
			return errors.New("--snapshot-at needs --backfill")
		case f.dryRun && !f.check:
			return errors.New("--dry-run needs --backfill (or --check, to skip ClickHouse)")
		}
	}
	if f.backfill && f.check {
		return errors.New("--backfill and --check are separate modes; give one")
	}
	if f.migrate && (f.backfill || f.check || f.dryRun) {
		return errors.New("--migrate is a mode of its own; give it alone")
	}
	if f.schedule != "" && len(f.nft) > 0 {
		return errors.New("--schedule and --nft both choose the names; give one")
	}
	return nil
}
