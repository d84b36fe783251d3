// Package check is readsync --check: it reports on the configuration
// (with a line for each schedule whose names come from a file or a
// query), the spool, the Kubernetes API, the upstream API and ClickHouse,
// one line each, and changes nothing: not the spool, not the database.
package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/internal/shard"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/spool"
	"github.com/readsync/readsync/sync"
)

// Outcome is what a check found, for the exit code.
type Outcome int

const (
	// OK is every part usable.
	OK Outcome = iota
	// Failed is a part that does not work now (the API, ClickHouse, the
	// Kubernetes API), which may mend.
	Failed
	// ConfigError is configuration that cannot work: an unknown READSYNC_
	// variable, an unusable spool directory, a DSN on ClickHouse's HTTP port.
	ConfigError
)

// Details asks the upstream for a project's details; *apiclient.Client is
// the real one.
type Details interface {
	ProjectDetails(ctx context.Context, nft string) (apiclient.Project, error)
}

// Config is what a check looks at and with what.
type Config struct {
	// Out receives the lines.
	Out io.Writer
	// SchedulesFile is the schedules file, and Schedules its schedules.
	SchedulesFile string
	Schedules     []sync.Schedule
	// Unknown describes each READSYNC_ variable readsync does not read.
	Unknown []string
	// SpoolDir and SpoolMaxBytes are the spool's directory and cap.
	SpoolDir      string
	SpoolMaxBytes int64
	// Member is the StatefulSet's pod of READSYNC_SHARD, nil for none;
	// Shares reads its share.
	Member *shard.Member
	Shares shard.Source
	// APIBaseURL and Concurrency are the upstream's address and how many
	// requests may run at once.
	APIBaseURL  string
	Concurrency int
	// NewAPI returns a client of the upstream that calls observe at every
	// attempt and logs nothing.
	NewAPI func(observe func(op, outcome string, d time.Duration)) (Details, error)
	// OpenClickHouse connects to ClickHouse without migrating: for the
	// ClickHouse check, and to run the schedules' names queries.
	OpenClickHouse func(ctx context.Context) (*clickhouse.ClickHouse, error)
}

// Run checks each part in turn and prints a line for each: the
// configuration, the spool (unless skipClickHouse), the Kubernetes API
// (for a StatefulSet's pod), the upstream, and ClickHouse (unless
// skipClickHouse). With allNames, the upstream check asks for every
// configured name instead of the first, and adds a line for each that
// fails. A configuration error stops it at once.
func Run(ctx context.Context, c Config, skipClickHouse, allNames bool) Outcome {
	names, ok := c.config(ctx, skipClickHouse)
	if !ok {
		return ConfigError
	}
	if !skipClickHouse && !c.spool() {
		return ConfigError
	}
	outcome := OK
	if !c.kubernetes(ctx) {
		outcome = Failed
	}
	if !c.api(ctx, names, allNames) {
		outcome = Failed
	}
	if skipClickHouse {
		fmt.Fprintln(c.Out, "clickhouse: skipped (--dry-run)")
		return outcome
	}
	if err := c.checkClickHouse(ctx); err != nil {
		if errors.As(err, new(*chconn.HTTPPortError)) {
			fmt.Fprintf(c.Out, "clickhouse: FAILED: READSYNC_CLICKHOUSE_DSN: %v\n", err)
			return ConfigError
		}
		fmt.Fprintf(c.Out, "clickhouse: FAILED: %s\n", sink.Describe(err))
		outcome = Failed
	}
	return outcome
}

// config reports the schedules read, with every schedule's names read
// from its sources (see names), or the unknown variables or the sources
// that fail, which make the configuration fail. It returns the names.
func (c Config) config(ctx context.Context, skipClickHouse bool) ([]string, bool) {
	if len(c.Unknown) > 0 {
		fmt.Fprintf(c.Out, "config: FAILED: %s\n", strings.Join(c.Unknown, "; "))
		return nil, false
	}
	names, err := c.names(ctx, skipClickHouse)
	if err != nil {
		fmt.Fprintf(c.Out, "config: FAILED: %v\n", err)
		return nil, false
	}
	fmt.Fprintf(c.Out, "config: ok (%s: %d schedules, %d nft names)\n", c.SchedulesFile, len(c.Schedules), len(names))
	return names, true
}

// names reads every schedule's names from its sources, and prints a
// line per schedule that has a file or a query: each source and how many
// names it gave. A source that fails is an error naming the schedule and
// the source. It returns the names of every schedule, each once. Queries
// run on a connection of their own; with skipClickHouse (--dry-run) they
// are not run.
func (c Config) names(ctx context.Context, skipClickHouse bool) ([]string, error) {
	var q sync.NameQuerier
	if !skipClickHouse && slices.ContainsFunc(c.Schedules, func(s sync.Schedule) bool { return s.NamesQuery != "" }) {
		ch, err := c.OpenClickHouse(ctx)
		if err != nil {
			return nil, fmt.Errorf("READSYNC_CLICKHOUSE_DSN, to run nft_names_query: %w", err)
		}
		defer ch.Close()
		q = ch
	}
	var all []string
	var errs []error
	for _, s := range c.Schedules {
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
		for _, n := range counts {
			parts = append(parts, fmt.Sprintf("%s %d", n.Source, n.Names))
		}
		if sched.NamesQuery != s.NamesQuery {
			parts = append(parts, sync.SourceQuery+" skipped (--dry-run)")
		}
		fmt.Fprintf(c.Out, "names: ok (schedule %q: %s; %d names)\n", s.Name, strings.Join(parts, ", "), len(names))
		all = append(all, names...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(c.Schedules, sync.Schedule.Dynamic) {
		return sync.Names(c.Schedules), nil // in the file's order
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// spool reports what waits in the spool. It is inspected, not opened: a
// check may run beside the process that owns the spool, and must not take
// its lock or touch its files. A directory that cannot be one fails.
func (c Config) spool() bool {
	in, err := spool.Inspect(c.SpoolDir)
	switch {
	case err != nil:
		fmt.Fprintf(c.Out, "spool: FAILED: READSYNC_SPOOL_DIR: %v\n", err)
		return false
	case !in.Exists:
		fmt.Fprintf(c.Out, "spool: ok (%s: to be created at start)\n", c.SpoolDir)
	case in.Quarantined > 0:
		fmt.Fprintf(c.Out, "spool: ok (%s: %d entries waiting, %d of %d bytes used; %d entries quarantined: readsync --flush-spool --retry-quarantined once the cause is fixed)\n",
			c.SpoolDir, in.Entries, in.Bytes, c.SpoolMaxBytes, in.Quarantined)
	default:
		fmt.Fprintf(c.Out, "spool: ok (%s: %d entries waiting, %d of %d bytes used)\n",
			c.SpoolDir, in.Entries, in.Bytes, c.SpoolMaxBytes)
	}
	return true
}

// kubernetes reads a StatefulSet's pod's share; it has nothing to check
// for another process.
func (c Config) kubernetes(ctx context.Context) bool {
	if c.Member == nil {
		return true
	}
	sh, err := c.Shares.Check(ctx)
	if err != nil {
		fmt.Fprintf(c.Out, "kubernetes: FAILED: %v\n", err)
		return false
	}
	fmt.Fprintf(c.Out, "kubernetes: ok (StatefulSet %s has %d replicas; pod %s takes shard %s)\n",
		c.Member.Set, sh.Count, c.Member.Pod, sh)
	return true
}

// api asks the upstream for the first name, or with allNames for every
// name.
func (c Config) api(ctx context.Context, names []string, allNames bool) bool {
	check := func() error {
		if len(names) == 0 {
			fmt.Fprintln(c.Out, "api: skipped (no names to ask for)")
			return nil
		}
		return c.checkAPI(ctx, names[0])
	}
	if allNames {
		check = func() error { return c.checkAllNames(ctx, names) }
	}
	if err := check(); err != nil {
		fmt.Fprintf(c.Out, "api: FAILED: %v\n", err)
		return false
	}
	return true
}

// checkAPI asks for the first configured name's details: it proves the base
// URL, the credentials and the envelope in one request (and its retries,
// counted rather than logged).
func (c Config) checkAPI(ctx context.Context, nft string) error {
	attempts := 0
	api, err := c.NewAPI(func(string, string, time.Duration) { attempts++ })
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
	fmt.Fprintf(c.Out, "api: ok (%s: nft %q is project %d, %s%s)\n",
		c.APIBaseURL, nft, p.ID, time.Since(start).Round(time.Millisecond), retries)
	return nil
}

// checkAllNames asks for the details of every configured name (of every
// schedule, whatever READSYNC_SHARD says: it checks the file),
// Concurrency at a time and within the rate limit, and prints a line for
// each name that fails, in the file's order, for a new schedules file's
// typos. Like a pass, it stops asking once its sync.Breaker finds the
// upstream down.
func (c Config) checkAllNames(ctx context.Context, names []string) error {
	var attempts atomic.Int64
	api, err := c.NewAPI(func(string, string, time.Duration) { attempts.Add(1) })
	if err != nil {
		return err
	}
	start := time.Now()
	asked := askAll(ctx, api, names, c.Concurrency)
	failed, notAsked := 0, 0
	for i, a := range asked.list {
		switch {
		case !a.asked:
			notAsked++
		case a.err != nil:
			failed++
			fmt.Fprintf(c.Out, "api: nft %q: FAILED: %v\n", names[i], a.err)
		}
	}
	if cause := asked.stopped; cause != nil && notAsked > 0 {
		return fmt.Errorf("%w; %d of %d nft names not asked", cause, notAsked, len(names))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d nft names of %s failed", failed, len(names), c.SchedulesFile)
	}
	fmt.Fprintf(c.Out, "api: ok (%s: all %d nft names are registered projects, %s, %d requests)\n",
		c.APIBaseURL, len(names), time.Since(start).Round(time.Millisecond), attempts.Load())
	return nil
}

// answer is what asking for one name gave: err is nil for a registered
// project; asked is false for a name the check stopped before asking.
type answer struct {
	asked bool
	err   error
}

// answers are the answers for a list of names, in its order, and why the
// asking stopped early (nil when it did not).
type answers struct {
	list    []answer
	stopped error
}

// askAll asks for the details of each name, concurrency at a time, until
// its sync.Breaker finds the upstream down or ctx ends.
func askAll(ctx context.Context, api Details, names []string, concurrency int) answers {
	br := sync.NewBreaker(nil)
	askCtx, stopAsking := context.WithCancelCause(ctx)
	defer stopAsking(nil)
	out := make([]answer, len(names))
	jobs := make(chan int)
	var workers gosync.WaitGroup
	for range min(concurrency, len(names)) {
		workers.Go(func() {
			for i := range jobs {
				_, err := api.ProjectDetails(askCtx, names[i])
				if err != nil && askCtx.Err() != nil {
					continue // cut off: counted as not asked
				}
				out[i] = answer{asked: true, err: err}
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
	return answers{list: out, stopped: context.Cause(askCtx)}
}

// checkClickHouse connects without migrating, reaches every host of a
// cluster, and says whether the schema is current, and if not whether the
// pending migrations would apply.
func (c Config) checkClickHouse(ctx context.Context) error {
	// Trying pending migrations creates and drops a scratch database: on
	// a cluster, ON CLUSTER statements that wait for every host.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Connect without migrating: a check must not change the database.
	ch, err := c.OpenClickHouse(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	v, err := ch.Ping(ctx)
	if err != nil {
		return err
	}
	if err := c.checkHosts(ctx, ch); err != nil {
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
	fmt.Fprintf(c.Out, "clickhouse: ok (server %s, database %q, %s)\n", v, ch.Database(), schema)
	return nil
}

// checkHosts reaches every host of the cluster, one line each; it fails
// when the cluster is unknown or a host does not answer.
func (c Config) checkHosts(ctx context.Context, ch *clickhouse.ClickHouse) error {
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
			fmt.Fprintf(c.Out, "clickhouse: cluster %s host %s (shard %d, replica %d): FAILED: %v\n", cluster, h.Address, h.Shard, h.Replica, h.Err)
			continue
		}
		fmt.Fprintf(c.Out, "clickhouse: cluster %s host %s (shard %d, replica %d): ok (server %s)\n", cluster, h.Address, h.Shard, h.Replica, h.Version)
	}
	if down > 0 {
		return fmt.Errorf("%d of %d hosts of cluster %s do not answer", down, len(hosts), cluster)
	}
	return nil
}
