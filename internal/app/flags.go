package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/readsync/readsync/internal/config"

	"github.com/readsync/readsync/sink"
)

// flags are the command-line options; the names are a contract.
type flags struct {
	backfill   bool
	schedule   string
	nft        nftList
	snapshotAt time.Time
	dryRun     bool
	check      bool
	allNames   bool
	flushSpool bool
	// retryQuarantined replays the spool's quarantined entries too.
	retryQuarantined bool
	migrate          bool
	verify           bool
	since            sinceFlag
	repair           bool
	failingNames     bool
	expire           bool
	json             bool
	version          bool
}

// sinceFlag is --since: where --verify's window starts, and since when
// what was written is in it, as an RFC 3339 time, a UTC date, or a Go
// duration before now. Unset, the window is the whole history.
type sinceFlag struct {
	t   time.Time
	set bool
}

func (s *sinceFlag) String() string {
	if !s.set {
		return ""
	}
	return s.t.Format(time.RFC3339)
}

func (s *sinceFlag) Set(v string) error {
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return errors.New("a duration before now must be positive, such as 48h")
		}
		s.t, s.set = time.Now().Add(-d).UTC(), true
		return nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		t, err = time.Parse(time.DateOnly, v)
	}
	if err != nil {
		return errors.New("want an RFC 3339 time such as 2026-01-01T00:00:00Z, a UTC date such as 2026-01-01, or a duration before now such as 48h")
	}
	if err := sink.CheckTime(t); err != nil {
		return err
	}
	s.t, s.set = t.UTC(), true
	return nil
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
	if err := sink.CheckTime(t); err != nil {
		return err
	}
	*s.t = t.UTC()
	return nil
}

const usageText = `Usage: readsync [flags]

With no flag, readsync runs as a daemon: it migrates ClickHouse (or, with
READSYNC_MIGRATIONS=wait, waits for readsync --migrate to) and runs every
schedule of the schedules file on its cron until SIGTERM or SIGINT.
--migrate, --verify, --failing-names and --expire read only ClickHouse: they
need READSYNC_CLICKHOUSE_DSN and none of the API's settings.

Flags:
`

// exitCodes are the exit codes --help explains, one line each; the
// reference (docs/configuration.md, "Exit codes") says more.
func exitCodes() []struct {
	code    int
	meaning string
} {
	return []struct {
		code    int
		meaning string
	}{
		{ExitOK, "done: every name synced; the schema current (--migrate); every view equal (--verify); no name failing (--failing-names)"},
		{ExitFailed, "a name failed or the run could not complete; a migration failed; a view differs; a name is failing; a drop failed (--expire)"},
		{ExitConfig, "bad configuration or usage: the message names the variable, file or flag"},
		{ExitSpooled, "rows wait in the spool (--backfill, --flush-spool): deliver them with readsync --flush-spool; takes precedence over 1"},
	}
}

// parseFlags parses args. Errors are usage errors: the process exits 2.
// -h and --help return flag.ErrHelp.
func parseFlags(args []string) (flags, error) {
	var f flags
	fs := newFlagSet(&f)
	// The flag package would print the error and the whole usage; the
	// caller prints one line instead.
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return f, f.validate()
}

// printHelp writes --help: the usage, the flags, the environment and the
// exit codes.
func printHelp(w io.Writer) {
	var f flags
	fs := newFlagSet(&f)
	fs.SetOutput(w)
	fmt.Fprint(w, usageText)
	fs.PrintDefaults()
	printEnvironment(w)
	fmt.Fprint(w, "\nExit codes:\n")
	for _, c := range exitCodes() {
		fmt.Fprintf(w, "  %d  %s\n", c.code, c.meaning)
	}
}

// newFlagSet defines readsync's flags into f.
func newFlagSet(f *flags) *flag.FlagSet {
	fs := flag.NewFlagSet("readsync", flag.ContinueOnError)
	fs.Usage = func() {} // printHelp, by the caller
	fs.BoolVar(&f.backfill, "backfill", false, "run one pass now over all schedules' names, then exit")
	fs.StringVar(&f.schedule, "schedule", "", "with --backfill: only this schedule's names; with --failing-names: only this schedule's")
	fs.Var(&f.nft, "nft", "with --backfill: exactly these nft names, comma-separated (repeatable)")
	fs.Var(snapshotFlag{&f.snapshotAt}, "snapshot-at", "with --backfill: stamp the pass with this RFC 3339 time (default: the pass start)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "with --backfill: print rows as JSON lines on stdout instead of writing ClickHouse; with --expire: print what it would drop")
	fs.BoolVar(&f.check, "check", false, "validate configuration, reach the API and ClickHouse, report, exit")
	fs.BoolVar(&f.allNames, "all-names", false, "with --check: ask for every configured nft name, within the rate limit, and list those that fail")
	fs.BoolVar(&f.flushSpool, "flush-spool", false, "replay the spool into ClickHouse, then exit: 0 when it is empty, 3 when entries remain")
	fs.BoolVar(&f.retryQuarantined, "retry-quarantined", false, "with --flush-spool: first replay the entries moved aside into the spool's quarantine/, once what made ClickHouse refuse them is fixed")
	fs.BoolVar(&f.migrate, "migrate", false, "apply pending ClickHouse migrations, then exit (for an init container or a Job)")
	fs.BoolVar(&f.verify, "verify", false, "compare every dashboard view with its brute force over the stored history, print what differs, exit 1 if anything does")
	fs.Var(&f.since, "since", "with --verify: compare the snapshots and days from this UTC day on, and every snapshot and tick written since then (RFC 3339 time, date, or a duration before now such as 48h; default: the whole history)")
	fs.BoolVar(&f.repair, "repair", false, "with --verify: rebuild the derived rows of the projects that differ, then verify again")
	fs.BoolVar(&f.failingNames, "failing-names", false, "print the names failing now (name_health), one a line: schedule, nft, passes failed in a row, kind, last error; exit 1 if any is")
	fs.BoolVar(&f.json, "json", false, "with --failing-names: print one JSON object a line, with name_health's columns")
	fs.BoolVar(&f.expire, "expire", false, "drop once the partitions older than their retention (READSYNC_RETAIN_RAW, READSYNC_RETAIN_HOURLY, READSYNC_RETAIN_DAILY), then exit: 0 done, 1 failed")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	return fs
}

// FlagNames lists the flags readsync defines, in the order --help prints
// them (without -help, which the flag package answers itself). It is for
// the tests that hold the documentation to the binary.
func FlagNames() []string {
	var f flags
	var names []string
	newFlagSet(&f).VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	return names
}

// IsBackfill parses args as readsync does and reports whether they ask
// for a backfill; the error is the usage error readsync would exit 2 with.
// It is for the tests that hold the deployments' arguments to the binary.
func IsBackfill(args []string) (bool, error) {
	f, err := parseFlags(args)
	return f.backfill, err
}

// needs says what the mode of f uses: the modes that read only
// ClickHouse need none of the API's settings.
func (f flags) needs() config.Needs {
	switch {
	case f.migrate:
		return config.Needs{DSN: true, Mode: "--migrate"}
	case f.verify:
		return config.Needs{DSN: true, Mode: "--verify"}
	case f.failingNames:
		return config.Needs{DSN: true, Mode: "--failing-names"}
	case f.expire && f.dryRun:
		return config.Needs{DSN: true, Mode: "--expire --dry-run"}
	case f.expire:
		return config.Needs{DSN: true, Mode: "--expire"}
	default:
		// A dry run (--backfill, --check) writes nowhere.
		return config.Needs{API: true, DSN: !f.dryRun}
	}
}

func (f flags) validate() error {
	if !f.backfill {
		switch {
		case f.schedule != "" && !f.failingNames:
			return errors.New("--schedule needs --backfill or --failing-names")
		case len(f.nft) > 0:
			return errors.New("--nft needs --backfill")
		case !f.snapshotAt.IsZero():
			return errors.New("--snapshot-at needs --backfill")
		case f.dryRun && !f.check && !f.expire:
			return errors.New("--dry-run needs --backfill (or --check, to skip ClickHouse, or --expire, to print what it would drop)")
		}
	}
	if f.allNames && !f.check {
		return errors.New("--all-names needs --check")
	}
	if f.backfill && f.check {
		return errors.New("--backfill and --check are separate modes; give one")
	}
	if f.flushSpool && (f.backfill || f.check || f.dryRun) {
		return errors.New("--flush-spool is a mode of its own; give it without --backfill, --check or --dry-run")
	}
	if f.retryQuarantined && !f.flushSpool {
		return errors.New("--retry-quarantined needs --flush-spool")
	}
	if f.migrate && (f.backfill || f.check || f.dryRun || f.flushSpool) {
		return errors.New("--migrate is a mode of its own; give it alone")
	}
	if f.verify && (f.backfill || f.check || f.dryRun || f.flushSpool || f.migrate) {
		return errors.New("--verify is a mode of its own; give it alone, with --since or --repair")
	}
	if f.since.set && !f.verify {
		return errors.New("--since needs --verify")
	}
	if f.repair && !f.verify {
		return errors.New("--repair needs --verify")
	}
	if f.failingNames && (f.backfill || f.check || f.dryRun || f.flushSpool || f.migrate || f.verify) {
		return errors.New("--failing-names is a mode of its own; give it alone, with --schedule or --json")
	}
	if f.expire && (f.backfill || f.check || f.flushSpool || f.migrate || f.verify || f.failingNames) {
		return errors.New("--expire is a mode of its own; give it alone, or with --dry-run")
	}
	if f.json && !f.failingNames {
		return errors.New("--json needs --failing-names")
	}
	if f.schedule != "" && len(f.nft) > 0 {
		return errors.New("--schedule and --nft both choose the names; give one")
	}
	return nil
}

// printEnvironment lists the environment variables the way flag lists the
// flags: name and default, then the description.
func printEnvironment(w io.Writer) {
	fmt.Fprint(w, "\nEnvironment:\n")
	for _, v := range config.Variables() {
		switch {
		case v.Required:
			fmt.Fprintf(w, "  %s (required)\n", v.Name)
		case v.Default != "":
			fmt.Fprintf(w, "  %s (default %s)\n", v.Name, v.Default)
		default:
			fmt.Fprintf(w, "  %s\n", v.Name)
		}
		fmt.Fprintf(w, "    \t%s\n", v.Help)
	}
}
