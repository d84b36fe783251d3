package migrate

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// migrateSpeeds is migration 17: it creates the speed rollup, computes
// every message's row from the age rollup that migration 16 folded, a
// range of projects at a time, then writes message_read_speed again over
// the rollup: until the fold ends, the view computes the speeds as
// before. A message's row needs its whole curve, whose rows span months,
// so the ranges are of projects over every month, of at most foldRows
// age rows each. Writes refresh their messages' rows from the moment the
// table exists; a row both compute holds the same values, and the newer
// computation wins (schema's speed.go). Run again, it changes nothing
// the view shows.
func migrateSpeeds(ctx context.Context, m *migrator) error {
	for _, q := range schema.SpeedTableDDL(m.ddl) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	if err := m.foldSpeeds(ctx); err != nil {
		return err
	}
	for _, q := range schema.SpeedViewDDL(m.ddl) {
		if err := m.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// foldSpeeds computes the speed rollup's rows of every message with age
// rows, a range of projects at a time.
func (m *migrator) foldSpeeds(ctx context.Context) error {
	limit := uint64(foldRows)
	if m.foldRows > 0 {
		limit = m.foldRows
	}
	start := time.Now()
	var (
		ranges      [][2]int64
		first, last int64
		rows        uint64
	)
	q := fmt.Sprintf("SELECT project_id, count() FROM %s GROUP BY project_id ORDER BY project_id", m.ddl.Table(schema.AgeRollup))
	err := chconn.QueryEach(ctx, m.conn, q, func(r driver.Rows) error {
		var (
			p int64
			n uint64
		)
		if err := r.Scan(&p, &n); err != nil {
			return err
		}
		if rows > 0 && rows+n > limit {
			ranges = append(ranges, [2]int64{first, last})
			rows = 0
		}
		if rows == 0 {
			first = p
		}
		last, rows = p, rows+n
		return nil
	})
	if err != nil {
		return fmt.Errorf("count the rows of each project of %s: %w", schema.AgeRollup, err)
	}
	if rows > 0 {
		ranges = append(ranges, [2]int64{first, last})
	}
	for i, r := range ranges {
		if err := m.held(ctx); err != nil {
			return err
		}
		if err := m.exec(ctx, schema.SpeedRefill(m.ddl.Names, fmt.Sprintf("project_id BETWEEN %d AND %d", r[0], r[1]))); err != nil {
			return fmt.Errorf("fold %s into %s (projects %d to %d, part %d of %d): %w", schema.AgeRollup, schema.SpeedRollup, r[0], r[1], i+1, len(ranges), err)
		}
	}
	m.log.Info("folded the age rollup into the speed rollup", "table", schema.SpeedRollup, "parts", len(ranges), "duration_ms", time.Since(start).Milliseconds())
	return nil
}
