// Package clickhouse is where readsync's rows go in ClickHouse: the
// ClickHouse type, a sink.Writer, that the daemon, the spool and the
// command line use. Each of its methods wires the packages that do the
// work: chconn talks to the server, migrate brings the database to
// readsync's tables and views (package schema declares them), resort
// moves an earlier release's snapshot table onto its sort key, derived
// keeps the rows derived from the stored history.
package clickhouse

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/schema/resort"
	"github.com/readsync/readsync/sink/verify"
)

// ClickHouse writes rows to a ClickHouse server over the native protocol.
// It is safe for concurrent use; Close releases its connections.
type ClickHouse struct {
	conn    *chconn.Conn
	history *derived.History

	schemaMu   sync.Mutex
	migrated   bool
	migrateErr error // why the last Migrate failed; nil once one succeeds
	// waitSchema: Migrate leaves the migrations to another process (see
	// WithSchemaFromElsewhere).
	waitSchema bool

	resort resort.Options
	verify []verify.Option
}

// ObserveInserts makes every INSERT report its table, row count, duration
// and error to f, e.g. to feed metrics. Call it before the first write.
func (c *ClickHouse) ObserveInserts(f func(table string, rows int, d time.Duration, err error)) {
	c.conn.ObserveInserts(f)
}

// Option configures OpenClickHouse.
type Option func(*options)

// options are what OpenClickHouse opens the connection with.
type options struct {
	topo    chconn.Topology
	log     *slog.Logger
	history []derived.Option
	resort  resort.Options
	wrap    func(driver.Conn) driver.Conn
	verify  []verify.Option
	// waitSchema is WithSchemaFromElsewhere.
	waitSchema bool
}

// WithTopology places the tables on a cluster (see chconn.Topology);
// without it they live on the one server the DSN names.
func WithTopology(t chconn.Topology) Option { return func(o *options) { o.topo = t } }

// WithLogger sets where migrations report their progress; by default
// nowhere.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithReconcileSettle makes the reconcile read a change d after its time
// rather than after the delay that makes sure it is visible (see
// derived.History.Settle): for tests that write and reconcile in turn.
func WithReconcileSettle(d time.Duration) Option {
	return func(o *options) { o.history = append(o.history, derived.WithSettle(d)) }
}

// WithReconcileLease makes the other daemons leave the reconcile steps to
// the one that recorded the latest step for d rather than for
// derived.Lease (see derived.History.Lease): for tests of a daemon that
// takes over from one that stopped.
func WithReconcileLease(d time.Duration) Option {
	return func(o *options) { o.history = append(o.history, derived.WithLease(d)) }
}

// WithRefreshLease makes a recomputation that recorded no end count as
// running for d after its start (see derived.History.RefreshLease): for
// tests.
func WithRefreshLease(d time.Duration) Option {
	return func(o *options) { o.history = append(o.history, derived.WithRefreshLease(d)) }
}

// WithResort tunes the move of message_read_snapshots onto its sort key
// (see resort.Options): for tests that move a small table at once.
func WithResort(r resort.Options) Option { return func(o *options) { o.resort = r } }

// WithSchemaFromElsewhere makes Migrate apply nothing: it reads the
// schema's version and succeeds once another process (readsync --migrate,
// as a Helm hook runs it) has applied every migration this readsync
// knows, and until then fails with a *SchemaBehindError. Writes wait the
// same way, since each first calls Migrate.
func WithSchemaFromElsewhere() Option { return func(o *options) { o.waitSchema = true } }

// WithIntercept sends every statement through the connection wrap
// returns for readsync's own: for tests that record the statements sent
// and what each cost the server.
func WithIntercept(wrap func(driver.Conn) driver.Conn) Option {
	return func(o *options) { o.wrap = wrap }
}

// WithVerifyStepRows bounds the snapshot rows one step of Verify's brute
// force reads (verify.WithStepRows).
func WithVerifyStepRows(n uint64) Option {
	return func(o *options) { o.verify = append(o.verify, verify.WithStepRows(n)) }
}

// OpenClickHouse connects to the server the DSN names. It does not require
// the DSN's database to exist: Migrate creates it, and every statement names
// its database explicitly.
func OpenClickHouse(ctx context.Context, dsn chconn.DSN, opts ...Option) (*ClickHouse, error) {
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	conn, err := chconn.Open(dsn, o.topo, o.log)
	if err != nil {
		return nil, err
	}
	if o.wrap != nil {
		conn.Intercept(o.wrap)
	}
	return &ClickHouse{conn: conn, history: derived.New(conn, o.history...), resort: o.resort, verify: o.verify, waitSchema: o.waitSchema}, nil
}

// Close closes the connections.
func (c *ClickHouse) Close() error { return c.conn.Close() }

// Database is the database the tables live in.
func (c *ClickHouse) Database() string { return c.conn.Names().Database() }

// Server returns the server readsync writes to, read on the first call
// that reaches it and kept for the connection's life.
func (c *ClickHouse) Server(ctx context.Context) (chconn.Server, error) { return c.conn.Server(ctx) }

// Hosts reaches every host of the cluster, with the DSN's credentials and
// settings, and reports each one's version or why it did not answer. The
// error is for the list itself: an unknown cluster, or the server not
// answering.
func (c *ClickHouse) Hosts(ctx context.Context) ([]chconn.Host, error) { return c.conn.Hosts(ctx) }

// Clustered reports whether the tables live on a cluster, and its name.
func (c *ClickHouse) Clustered() (string, bool) {
	return c.conn.Names().Topology().Cluster, c.conn.Names().Clustered()
}

// Ping checks that the server answers now and returns its release.
func (c *ClickHouse) Ping(ctx context.Context) (string, error) {
	if err := c.conn.Ping(ctx); err != nil {
		return "", c.conn.Redact(fmt.Errorf("ping ClickHouse: %w", err))
	}
	s, err := c.Server(ctx)
	if err != nil {
		return "", err
	}
	return s.Release, nil
}
