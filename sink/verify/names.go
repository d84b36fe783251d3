package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// nameHealthShape is name_health as Verify compares it: a row per
// schedule and name, over the day of failures the view reads, whatever
// the window of the snapshots compared.
var nameHealthShape = viewShape{name: schema.NameHealthView, key: []viewColumn{colSchedule, colNFT},
	values: []viewColumn{{"last_success_at", kindTime}, {"last_failure_at", kindTime}, {"last_error_kind", kindString},
		{"last_error", kindString}, {"last_http_status", kindNumber}, {"failures_24h", kindNumber}, {"failing_passes", kindNumber}}}

// compareNameHealth compares name_health, which reads each name's
// failures by the hour (name_failure_hour_rollup), with the same columns
// computed from name_failures itself. One query reads both, joined by
// schedule and name, so that their day ends at the same now(); the rows
// stream through, and only those that differ are kept.
func (c *Checker) compareNameHealth(ctx context.Context, judged *comparison) error {
	shape := nameHealthShape
	var keys, values []string
	for _, col := range shape.key {
		keys = append(keys, col.sql())
	}
	for _, col := range shape.values {
		values = append(values, col.sql())
	}
	row := "concat(" + strings.Join(values, ", '\\t', ") + ")"
	side := func(from, mark string) string {
		return fmt.Sprintf("SELECT schedule, nft, %s AS %s_key, 1 AS %s, %s AS %s_row FROM %s",
			"concat("+strings.Join(keys, ", '\\t', ")+")", mark, mark, row, mark, from)
	}
	q := "SELECT got, got_key, got_row, want, want_key, want_row FROM " + schema.Join("ALL FULL",
		side(c.names.Table(schema.NameHealthView), "got"), side("(\n"+schema.NameHealthFromFailures(c.names)+"\n)", "want"), "schedule, nft")
	acc := judged.diffs_[shape.name]
	err := chconn.QueryEach(ctx, c.conn, q, func(rows driver.Rows) error {
		var (
			inView, inBrute                   uint8
			viewKey, viewRow, bruteKey, brute string
		)
		if err := rows.Scan(&inView, &viewKey, &viewRow, &inBrute, &bruteKey, &brute); err != nil {
			return err
		}
		switch {
		case inBrute == 0:
			note(&acc.Extra, &acc.ExtraRows, RowDiff{Key: shape.showKey(viewKey), Got: shape.showValues(viewRow)})
		case inView == 0:
			acc.Rows++
			note(&acc.Missing, &acc.MissingRows, RowDiff{Key: shape.showKey(bruteKey), Want: shape.showValues(brute)})
		default:
			acc.Rows++
			if viewRow != brute {
				note(&acc.Wrong, &acc.WrongRows, RowDiff{Key: shape.showKey(bruteKey), Got: shape.showValues(viewRow), Want: shape.showValues(brute)})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("compare %s with its brute force: %w", shape.name, err)
	}
	return nil
}
