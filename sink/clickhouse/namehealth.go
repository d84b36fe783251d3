package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// NameHealth is a row of the view name_health: how a name of a schedule
// fared in the passes that asked for it.
type NameHealth struct {
	Schedule string `json:"schedule"`
	NFT      string `json:"nft"`
	// LastSuccessAt is the epoch when no pass read the name.
	LastSuccessAt  time.Time `json:"last_success_at"`
	LastFailureAt  time.Time `json:"last_failure_at"`
	LastErrorKind  string    `json:"last_error_kind"`
	LastError      string    `json:"last_error"`
	LastHTTPStatus uint16    `json:"last_http_status"`
	Failures24h    uint64    `json:"failures_24h"`
	// FailingPasses counts the passes in a row that failed to read the
	// name, 0 when the last one read it.
	FailingPasses uint64 `json:"failing_passes"`
}

// FailingNames calls each with the rows of name_health whose names are
// failing (failing_passes > 0), of the schedule when it is set, those
// failing the most passes in a row first.
//
// It changes nothing, so it does not migrate either: a schema with the
// view's migration pending is an error that says so.
func (c *ClickHouse) FailingNames(ctx context.Context, schedule *string, each func(NameHealth) error) error {
	v, err := c.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if !v.Current() {
		return fmt.Errorf("database %q is at schema version %d, with migrations pending (%s): apply them first (readsync --migrate)",
			c.Database(), v.Applied, strings.Join(v.Pending, ", "))
	}
	err = chconn.QueryEach(ctx, c.conn, failingNamesQuery(c.conn.Names(), schedule, 0), func(rows driver.Rows) error {
		h, err := scanNameHealth(rows)
		if err != nil {
			return err
		}
		return each(h)
	})
	if err != nil {
		return c.conn.Redact(fmt.Errorf("read %s: %w", schema.NameHealthView, err))
	}
	return nil
}

// failingNamesQuery selects the rows of name_health whose names are
// failing, of the schedule when it is set, those failing the most passes
// in a row first; at most limit of them unless it is 0.
func failingNamesQuery(n chconn.Names, schedule *string, limit int) string {
	where := "failing_passes > 0"
	if schedule != nil {
		where += " AND schedule = " + chconn.QuoteString(*schedule)
	}
	lim := ""
	if limit > 0 {
		lim = fmt.Sprintf(" LIMIT %d", limit)
	}
	return fmt.Sprintf(`SELECT schedule, nft, last_success_at, last_failure_at, last_error_kind, last_error, last_http_status, failures_24h, failing_passes
FROM %s WHERE %s ORDER BY failing_passes DESC, schedule, nft%s%s`, n.Table(schema.NameHealthView), where, lim, pushDown)
}

// scanNameHealth reads a row of failingNamesQuery.
func scanNameHealth(rows driver.Rows) (NameHealth, error) {
	var h NameHealth
	if err := rows.Scan(&h.Schedule, &h.NFT, &h.LastSuccessAt, &h.LastFailureAt, &h.LastErrorKind, &h.LastError, &h.LastHTTPStatus, &h.Failures24h, &h.FailingPasses); err != nil {
		return h, err
	}
	h.LastSuccessAt, h.LastFailureAt = h.LastSuccessAt.UTC(), h.LastFailureAt.UTC()
	return h, nil
}

// pushDown has 18.16 push a query's WHERE into the view, whose half of
// the names that are not failing it then skips (current releases do it
// by default): 60 ms against 110 at 100 000 names, 1 000 failing.
const pushDown = "\nSETTINGS enable_optimize_predicate_expression = 1"

// NamesFailing is how the names of a schedule fare, from name_health.
type NamesFailing struct {
	// Failing counts the names failing now; NotRead those that failed at
	// least the passes in a row asked of NamesFailing.
	Failing, NotRead uint64
	// MaxPasses is the most passes in a row a name has failed.
	MaxPasses uint64
}

// NamesFailing returns, by schedule, how many names are failing, how many
// have failed at least passes passes in a row, and the longest run, for
// every schedule with a failing name in name_health: a schedule it does
// not name has none. It reads the failing names only, the half of the
// view a server prunes the others' successes from.
func (c *ClickHouse) NamesFailing(ctx context.Context, passes uint64) (map[string]NamesFailing, error) {
	if err := c.ensureSchema(ctx); err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`SELECT schedule, count(), countIf(failing_passes >= %d), max(failing_passes)
FROM %s WHERE failing_passes > 0 GROUP BY schedule%s`, passes, c.conn.Names().Table(schema.NameHealthView), pushDown)
	out := map[string]NamesFailing{}
	err := chconn.QueryEach(ctx, c.conn, q, func(rows driver.Rows) error {
		var (
			s string
			f NamesFailing
		)
		if err := rows.Scan(&s, &f.Failing, &f.NotRead, &f.MaxPasses); err != nil {
			return err
		}
		out[s] = f
		return nil
	})
	if err != nil {
		return nil, c.conn.Redact(fmt.Errorf("count the failing names in %s: %w", schema.NameHealthView, err))
	}
	return out, nil
}
