package sinktest

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
)

// Costs records the statements sent through a connection and, for each,
// the rows the server read for it by its own account: system.query_log
// where the server keeps one (18.16 with the scripts' configuration),
// otherwise the progress packets it sent while the statement ran (the
// library build of the current release keeps no query log). Both count
// what an INSERT … SELECT read, which the driver's progress on 18.16 does
// not. Install it with chconn.Conn.Intercept (Wrap); it is safe for
// concurrent use.
type Costs struct {
	mu    sync.Mutex
	stmts []*Statement
	seq   atomic.Uint64
	tag   string
}

// Statement is one statement sent, and what the server read for it once
// Read has asked.
type Statement struct {
	// ID is the query ID it was sent with.
	ID string
	// Text is the statement as sent.
	Text string
	// Rows is what the server read for it (Read fills it in).
	Rows uint64

	progress atomic.Uint64
}

// NewCosts returns an empty record.
func NewCosts() *Costs {
	return &Costs{tag: uniqueDatabase()}
}

// Wrap returns conn recording every statement sent through it.
func (c *Costs) Wrap(conn driver.Conn) driver.Conn { return &costConn{Conn: conn, c: c} }

// Take returns the statements recorded since the last Take, in the order
// they were sent, and starts a new record.
func (c *Costs) Take() []*Statement {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.stmts
	c.stmts = nil
	return out
}

// note records q and returns ctx sending it under its own query ID, with
// the server logging it and its progress counted.
func (c *Costs) note(ctx context.Context, q string) context.Context {
	s := &Statement{ID: fmt.Sprintf("%s-%d", c.tag, c.seq.Add(1)), Text: q}
	c.mu.Lock()
	c.stmts = append(c.stmts, s)
	c.mu.Unlock()
	// The statement's own progress, and that of the sink.Reads its
	// context counts in, if any: the connection's own count goes on.
	reads := sink.ReadsOf(ctx)
	ctx = chconn.WithSettings(ctx, clickhouse.Settings{"log_queries": 1})
	return clickhouse.Context(ctx, clickhouse.WithQueryID(s.ID), clickhouse.WithProgress(func(p *clickhouse.Progress) {
		s.progress.Add(p.Rows)
		reads.Add(p.Rows, p.Bytes)
	}))
}

// Read fills in what the server read for each of stmts, from conn's
// server: its query log when it keeps one, else the progress recorded.
func (c *Costs) Read(t testing.TB, conn driver.Conn, stmts []*Statement) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Fill(ctx, conn, stmts); err != nil {
		t.Fatal(err)
	}
}

// Fill is Read for a caller that is no test (a benchmark).
func (c *Costs) Fill(ctx context.Context, conn driver.Conn, stmts []*Statement) error {
	logged := func() (bool, error) {
		var n uint64
		err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'system' AND name = 'query_log'").Scan(&n)
		return n > 0, err
	}
	// A server that logs no statement may still create the table at its
	// first flush.
	_ = conn.Exec(ctx, "SYSTEM FLUSH LOGS")
	ok, err := logged()
	if err != nil {
		return fmt.Errorf("look for system.query_log: %w", err)
	}
	if !ok {
		for _, s := range stmts {
			s.Rows = s.progress.Load()
		}
		return nil
	}
	byID := map[string]*Statement{}
	for _, s := range stmts {
		byID[s.ID] = s
	}
	// 18.16 writes its log behind the flush's answer at times: a statement
	// not yet found is looked for again, flushing each time, until the
	// caller's context ends. A statement never found fails the reading
	// rather than count as nothing read.
	for {
		err := chconn.QueryEach(ctx, conn, fmt.Sprintf("SELECT query_id, read_rows FROM system.query_log WHERE type IN (2, 3, 4) AND query_id LIKE '%s-%%'", c.tag),
			func(rows driver.Rows) error {
				var (
					id string
					n  uint64
				)
				if err := rows.Scan(&id, &n); err != nil {
					return err
				}
				if s := byID[id]; s != nil {
					s.Rows = n
					delete(byID, id)
				}
				return nil
			})
		if err != nil {
			return fmt.Errorf("read system.query_log: %w", err)
		}
		if len(byID) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("system.query_log holds %d of the %d statements recorded: %w", len(stmts)-len(byID), len(stmts), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		_ = conn.Exec(ctx, "SYSTEM FLUSH LOGS")
	}
}

// ByText adds up the rows read by the statements of stmts per normalized
// text (see Normalize).
func ByText(stmts []*Statement) map[string]uint64 {
	out := map[string]uint64{}
	for _, s := range stmts {
		out[Normalize(s.Text)] += s.Rows
	}
	return out
}

// Total adds up the rows read by stmts.
func Total(stmts []*Statement) uint64 {
	var n uint64
	for _, s := range stmts {
		n += s.Rows
	}
	return n
}

var (
	normDatabase = regexp.MustCompile("`?readsync_test_[0-9a-f]+`?")
	normString   = regexp.MustCompile(`'(?:[^'\\]|\\.)*'`)
	normNumber   = regexp.MustCompile(`\b\d+\b`)
	normSpace    = regexp.MustCompile(`\s+`)
)

// Normalize returns q with its literals (strings, numbers) and the test
// database's name replaced, and its spaces folded: the same statement at
// another time, for other projects or in another test's database has the
// same normalized text.
func Normalize(q string) string {
	q = normDatabase.ReplaceAllString(q, "db")
	q = normString.ReplaceAllString(q, "?")
	q = normNumber.ReplaceAllString(q, "?")
	return strings.TrimSpace(normSpace.ReplaceAllString(q, " "))
}

// Grown returns the statements, by text and sorted, that read more than
// 1.2 times at depth deep what they read at shallow, or than floor where
// shallow read less (a granule or two, which a read costs whatever the
// depth): the rule of the tests that hold a statement's reads to what
// changed.
func Grown(shallow, deep map[string]uint64, floor uint64) []string {
	var out []string
	for _, text := range slices.Sorted(maps.Keys(deep)) {
		if limit := max(shallow[text], floor); deep[text]*10 > limit*12 {
			out = append(out, text)
		}
	}
	return out
}

// Report formats per-text reads of two runs side by side, the texts
// sorted by the second's reads, for a test's log.
func Report(a, b map[string]uint64) string {
	var lines []string
	keys := slices.Sorted(maps.Keys(maps.Collect(func(yield func(string, uint64) bool) {
		for k, v := range a {
			if !yield(k, v) {
				return
			}
		}
		for k, v := range b {
			if !yield(k, v) {
				return
			}
		}
	})))
	slices.SortStableFunc(keys, func(x, y string) int { return int(b[y]) - int(b[x]) })
	for _, k := range keys {
		text := k
		if len(text) > 160 {
			text = text[:160] + "…"
		}
		lines = append(lines, fmt.Sprintf("%10d %10d  %s", a[k], b[k], text))
	}
	return strings.Join(lines, "\n")
}

type costConn struct {
	driver.Conn
	c *Costs
}

func (c *costConn) Exec(ctx context.Context, q string, args ...any) error {
	return c.Conn.Exec(c.c.note(ctx, q), q, args...)
}

func (c *costConn) Query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	return c.Conn.Query(c.c.note(ctx, q), q, args...)
}

func (c *costConn) QueryRow(ctx context.Context, q string, args ...any) driver.Row {
	return c.Conn.QueryRow(c.c.note(ctx, q), q, args...)
}

func (c *costConn) PrepareBatch(ctx context.Context, q string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	return c.Conn.PrepareBatch(c.c.note(ctx, q), q, opts...)
}

// TotalOf adds up per-text reads.
func TotalOf(byText map[string]uint64) uint64 {
	var n uint64
	for _, v := range byText {
		n += v
	}
	return n
}

// AwaitSettled waits until the clock of conn's server has moved more than
// settle past where it stood when called: then a reconcile whose settle
// delay is settle reads every change made before the call, and judges
// every refresh done before it. It polls the server's clock, whose
// seconds the change logs record.
func AwaitSettled(t testing.TB, conn driver.Conn, settle time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := func() uint32 {
		var n uint32
		if err := conn.QueryRow(ctx, "SELECT toUInt32(now())").Scan(&n); err != nil {
			t.Fatalf("read the server's time: %v", err)
		}
		return n
	}
	until := now() + uint32(settle/time.Second) + 1
	for now() <= until {
		select {
		case <-ctx.Done():
			t.Fatalf("the server's clock did not pass %d within a minute", until)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
