package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/spool"
	"github.com/readsync/readsync/sync"
)

// check reports on the configuration, the spool, the API and ClickHouse,
// one line each on stdout, and exits 0 only when all are usable. It changes
// nothing: not the spool, not the database. An unknown READSYNC_ variable,
// an unusable spool directory or a DSN on ClickHouse's HTTP port is a
// configuration error (exit 2), like those found before. The log on stderr
// carries no retry warnings: the API's line counts the retries. With
// allNames, the API check asks for every configured name instead of the
// first, and adds a line for each that fails.
func (a *app) check(ctx context.Context, skipClickHouse, allNames bool) int {
	if len(a.cfg.Unknown) > 0 {
		unknown := make([]string, len(a.cfg.Unknown))
		for i, u := range a.cfg.Unknown {
			unknown[i] = u.String()
		}
		fmt.Fprintf(a.stdout, "config: FAILED: %s\n", strings.Join(unknown, "; "))
		return exitConfig
	}
	names, err := a.checkNames(ctx, skipClickHouse)
	if err != nil {
		fmt.Fprintf(a.stdout, "config: FAILED: %v\n", err)
		return exitConfig
	}
	fmt.Fprintf(a.stdout, "config: ok (%s: %d schedules, %d nft names)\n",
		a.cfg.SchedulesFile, len(a.cfg.Schedules), len(names))
	if !skipClickHouse {
		// Inspected, not opened: a check may run beside the process that
		// owns the spool, and must not take its lock or touch its files.
		in, err := spool.Inspect(a.cfg.SpoolDir)
		switch {
		case err != nil:
			fmt.Fprintf(a.stdout, "spool: FAILED: READSYNC_SPOOL_DIR: %v\n", err)
			return exitConfig
		case !in.Exists:
			fmt.Fprintf(a.stdout, "spool: ok (%s: to be created at start)\n", a.cfg.SpoolDir)
		case in.Quarantined > 0:
			fmt.Fprintf(a.stdout, "spool: ok (%s: %d entries waiting, %d of %d bytes used; %d entries quarantined: readsync --flush-spool --retry-quarantined once the cause is fixed)\n",
				a.cfg.SpoolDir, in.Entries, in.Bytes, a.cfg.SpoolMaxBytes, in.Quarantined)
		default:
			fmt.Fprintf(a.stdout, "spool: ok (%s: %d entries waiting, %d of %d bytes used)\n",
				a.cfg.SpoolDir, in.Entries, in.Bytes, a.cfg.SpoolMaxBytes)
		}
	}
	code := exitOK
	if a.cfg.Member != nil {
		sh, err := a.shares.check(ctx)
		if err != nil {
			fmt.Fprintf(a.stdout, "kubernetes: FAILED: %v\n", err)
			code = exitFailed
		} else {
			fmt.Fprintf(a.stdout, "kubernetes: ok (StatefulSet %s has %d replicas; pod %s takes shard %s)\n",
				a.cfg.Member.Set, sh.Count, a.cfg.Member.Pod, sh)
		}
	}
	checkAPI := func() error {
		if len(names) == 0 {
			fmt.Fprintln(a.stdout, "api: skipped (no names to ask for)")
			return nil
		}
		return a.checkAPI(ctx, names[0])
	}
	if allNames {
		checkAPI = func() error { return a.checkAllNames(ctx, names) }
	}
	if err := checkAPI(); err != nil {
		fmt.Fprintf(a.stdout, "api: FAILED: %v\n", err)
		code = exitFailed
	}
	if skipClickHouse {
		fmt.Fprintln(a.stdout, "clickhouse: skipped (--dry-run)")
		return code
	}
	if err := a.checkClickHouse(ctx); err != nil {
		if errors.As(err, new(*chconn.HTTPPortError)) {
			fmt.Fprintf(a.stdout, "clickhouse: FAILED: READSYNC_CLICKHOUSE_DSN: %v\n", err)
			return exitConfig
		}
		fmt.Fprintf(a.stdout, "clickhouse: FAILED: %s\n", describeDBError(err))
		code = exitFailed
	}
	return code
}

// checkNames reads every schedule's names from its sources, and prints a
// line per schedule that has a file or a query: each source and how many
// names it gave. A source that fails is an error naming the schedule and
// the source. It returns the names of every schedule, each once. Queries
// run on a connection of their own; with skipClickHouse (--dry-run) they
// are not run.
func (a *app) checkNames(ctx context.Context, skipClickHouse bool) ([]string, error) {
	var q sync.NameQuerier
	if !skipClickHouse && slices.ContainsFunc(a.cfg.Schedules, func(s sync.Schedule) bool { return s.NamesQuery != "" }) {
		ch, err := a.openClickHouse(ctx)
		if err != nil {
			return nil, fmt.Errorf("READSYNC_CLICKHOUSE_DSN, to run nft_names_query: %w", err)
		}
		defer ch.Close()
		q = ch
	}
	var all []string
	var errs []error
	for _, s := range a.cfg.Schedules {
		if !s.Dynamic() {
			all = append(all, s.NFTNames...)
			continue
		}
		sched := s
		if q == nil {
			sched.NamesQuery = "" // --dry-run: no ClickHouse to run it on
		}
		names, counts, err := sync.ResolveNames(ctx, sched, q)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		parts := make([]string, 0, len(counts)+1)
		for _, c := range counts {
			parts = append(parts, fmt.Sprintf("%s %d", c.Source, c.Names))
		}
		if sched.NamesQuery != s.NamesQuery {
			parts = append(parts, sync.SourceQuery+" skipped (--dry-run)")
		}
		fmt.Fprintf(a.stdout, "names: ok (schedule %q: %s; %d names)\n", s.Name, strings.Join(parts, ", "), len(names))
		all = append(all, names...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(a.cfg.Schedules, sync.Schedule.Dynamic) {
		return sync.Names(a.cfg.Schedules), nil // in the file's order
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// checkAPI asks for the first configured name's details: it proves the base
// URL, the credentials and the envelope in one request (and its retries,
// counted rather than logged).
func (a *app) checkAPI(ctx context.Context, nft string) error {
	attempts := 0
	api, err := newAPIClient(a.cfg, slog.New(slog.DiscardHandler), func(string, string, time.Duration) { attempts++ })
	if err != nil {
		return err
	}
	start := time.Now()
	p, err := api.ProjectDetails(ctx, nft)
	if err != nil {
		return err
	}
	retries := ""
	switch attempts {
	case 1:
	case 2:
		retries = " after 1 retry"
	default:
		retries = fmt.Sprintf(" after %d retries", attempts-1)
	}
	fmt.Fprintf(a.stdout, "api: ok (%s: nft %q is project %d, %s%s)\n",
		a.cfg.APIBaseURL, nft, p.ID, time.Since(start).Round(time.Millisecond), retries)
	return nil
}

// checkAllNames asks for the details of every configured name (of every
// schedule, whatever READSYNC_SHARD says: it checks the file),
// READSYNC_CONCURRENCY at a time and within the rate limit, and prints a
// line for each name that fails, in the file's order, for a new schedules
// file's typos. Like a pass, it stops asking once its sync.Breaker finds
// the upstream down.
func (a *app) checkAllNames(ctx context.Context, names []string) error {
	var attempts atomic.Int64
	api, err := newAPIClient(a.cfg, slog.New(slog.DiscardHandler), func(string, string, time.Duration) { attempts.Add(1) })
	if err != nil {
		return err
	}
	start := time.Now()
	br := sync.NewBreaker(nil)
	askCtx, stopAsking := context.WithCancelCause(ctx)
	defer stopAsking(nil)
	errs := make([]error, len(names)) // nil: registered, or not asked when asked[i] is false
	asked := make([]bool, len(names))
	jobs := make(chan int)
	var workers gosync.WaitGroup
	for range min(a.cfg.Concurrency, len(names)) {
		workers.Go(func() {
			for i := range jobs {
				_, err := api.ProjectDetails(askCtx, names[i])
				if err != nil && askCtx.Err() != nil {
					continue // cut off: counted as not asked
				}
				errs[i], asked[i] = err, true
				if br.Record(err) {
					stopAsking(br.Cause())
				}
			}
		})
	}
	for i := range names {
		if askCtx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	workers.Wait()

	failed, notAsked := 0, 0
	for i, err := range errs {
		switch {
		case !asked[i]:
			notAsked++
		case err != nil:
			failed++
			fmt.Fprintf(a.stdout, "api: nft %q: FAILED: %v\n", names[i], err)
		}
	}
	if cause := context.Cause(askCtx); cause != nil && notAsked > 0 {
		return fmt.Errorf("%w; %d of %d nft names not asked", cause, notAsked, len(names))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d nft names of %s failed", failed, len(names), a.cfg.SchedulesFile)
	}
	fmt.Fprintf(a.stdout, "api: ok (%s: all %d nft names are registered projects, %s, %d requests)\n",
		a.cfg.APIBaseURL, len(names), time.Since(start).Round(time.Millisecond), attempts.Load())
	return nil
}

func (a *app) checkClickHouse(ctx context.Context) error {
	// Trying pending migrations creates and drops a scratch database: on
	// a cluster, ON CLUSTER statements that wait for every host.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Connect without migrating: a check must not change the database.
	ch, err := a.openClickHouse(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	v, err := ch.Ping(ctx)
	if err != nil {
		return err
	}
	if err := a.checkHosts(ctx, ch); err != nil {
		return err
	}
	sv, err := ch.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	schema := fmt.Sprintf("schema version %d, current", sv.Applied)
	switch {
	case sv.Applied > sv.Latest:
		schema = fmt.Sprintf("schema version %d, newer than this readsync's %d: a later release migrated it", sv.Applied, sv.Latest)
	case !sv.Current():
		// Whether they will apply is known only by applying them: the
		// server's dialect and the user's rights decide. A scratch
		// database takes them instead of the real one.
		if err := ch.TryMigrations(ctx); err != nil {
			return fmt.Errorf("server %s: pending migrations cannot apply: %w", v, err)
		}
		schema = fmt.Sprintf("schema version %d, pending: %s; this server takes them (tried in a scratch database); readsync --migrate or the daemon applies them",
			sv.Applied, strings.Join(sv.Pending, ", "))
	default:
		// A view an earlier release created may be one this server no
		// longer accepts (after an upgrade of ClickHouse).
		if err := ch.CheckViews(ctx); err != nil {
			return fmt.Errorf("server %s: %w", v, err)
		}
	}
	fmt.Fprintf(a.stdout, "clickhouse: ok (server %s, database %q, %s)\n", v, ch.Database(), schema)
	return nil
}

// checkHosts reaches every host of the cluster, one line each; it fails
// when the cluster is unknown or a host does not answer.
func (a *app) checkHosts(ctx context.Context, ch *clickhouse.ClickHouse) error {
	cluster, ok := ch.Clustered()
	if !ok {
		return nil
	}
	hosts, err := ch.Hosts(ctx)
	if err != nil {
		return fmt.Errorf("READSYNC_CLICKHOUSE_CLUSTER: %w", err)
	}
	down := 0
	for _, h := range hosts {
		if h.Err != nil {
			down++
			fmt.Fprintf(a.stdout, "clickhouse: cluster %s host %s (shard %d, replica %d): FAILED: %v\n", cluster, h.Address, h.Shard, h.Replica, h.Err)
			continue
		}
		fmt.Fprintf(a.stdout, "clickhouse: cluster %s host %s (shard %d, replica %d): ok (server %s)\n", cluster, h.Address, h.Shard, h.Replica, h.Version)
	}
	if down > 0 {
		return fmt.Errorf("%d of %d hosts of cluster %s do not answer", down, len(hosts), cluster)
	}
	return nil
}
