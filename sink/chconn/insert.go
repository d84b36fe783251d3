package chconn

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/readsync/readsync/sink"
)

// Table is a table as an INSERT of rows of type R sees it: its name and
// its columns, and each row's values in column order. The table
// declarations of package schema satisfy it, so that the column list and
// the values come from the one declaration of each table.
type Table[R any] interface {
	// Name is the table's name in its database.
	Name() string
	// ColumnList names the columns an INSERT fills, in order: the row's
	// own, then those of the batch: "a, b, c".
	ColumnList() string
	// RowValues appends the values of r's own columns to vals, in order.
	RowValues(vals []any, r *R) []any
	// BatchValues appends to vals the values of the columns whose value
	// is a fact of the whole write, taken from b (nil for rows written
	// without a batch, such as run records), in order.
	BatchValues(vals []any, b *sink.Batch) []any
}

// Insert writes rows of the batch b (nil for rows without one) into t with
// one INSERT and reports it to the function ObserveInserts gave. It fails
// with a *sink.TableError, which says which table did not take the rows.
func Insert[R any](ctx context.Context, c *Conn, t Table[R], b *sink.Batch, rows []R) error {
	return InsertSeq(ctx, c, t, b, len(rows), sliceRows(rows))
}

// sliceRows yields a pointer to each of rows, in order.
func sliceRows[R any](rows []R) iter.Seq[*R] {
	return func(yield func(*R) bool) {
		for i := range rows {
			if !yield(&rows[i]) {
				return
			}
		}
	}
}

// InsertSeq is Insert of the n rows rows yields, computed as they are
// sent, so that the process holds a block of them at a time rather than
// all. rows must yield the same rows each time it is ranged over: the
// deduplication token is computed from them before they are sent.
func InsertSeq[R any](ctx context.Context, c *Conn, t Table[R], b *sink.Batch, n int, rows iter.Seq[*R]) error {
	if n == 0 {
		return nil
	}
	start := time.Now()
	err := send(ctx, c, t, b, n, rows)
	if c.observe != nil {
		c.observe(t.Name(), n, time.Since(start), err)
	}
	if err != nil {
		return &sink.TableError{Table: t.Name(), Rows: n, Err: err}
	}
	return nil
}

// InsertBlockRows is how many rows the driver encodes and sends at a time
// within one INSERT, so that its columnar copy of a batch, and the encoded
// block, stay a block in size rather than the whole batch's. The server
// squashes the blocks of one INSERT (min_insert_block_size_rows), so a
// batch still makes one part per table.
const InsertBlockRows = 4096

func send[R any](ctx context.Context, c *Conn, t Table[R], b *sink.Batch, n int, rows iter.Seq[*R]) error {
	name := t.Name()
	// Sent without knowing the server, the INSERT would lack its token
	// and settings, and a repeat of it could count twice: until the
	// server has answered once, the write fails, to be retried or
	// spooled.
	s, err := c.Server(ctx)
	if err != nil {
		return fmt.Errorf("insert into %s: %w", name, err)
	}
	settings := c.insertSettings(s)
	if s.DedupTokens() {
		settings[settingDedupToken] = insertToken(t, b, rows)
	}
	ctx = WithSettings(ctx, settings)
	// Naming the columns is required by 18.16 and keeps added columns from
	// shifting values on newer servers.
	q := fmt.Sprintf("INSERT INTO %s (%s)", c.names.Table(name), t.ColumnList())
	bctx, release := batchContext(ctx)
	defer release()
	batch, err := c.conn.PrepareBatch(bctx, q)
	if err != nil {
		return c.Redact(fmt.Errorf("insert into %s: prepare: %w", name, err))
	}
	defer batch.Close()
	// One slice of values serves every row: the row's own, then the
	// batch's, which are the same for all of them.
	shared := t.BatchValues(nil, b)
	var (
		vals []any
		i    int
	)
	for r := range rows {
		vals = append(t.RowValues(vals[:0], r), shared...)
		if err := batch.Append(vals...); err != nil {
			return c.Redact(fmt.Errorf("insert into %s: row %d: %w", name, i, err))
		}
		i++
		if i%InsertBlockRows == 0 && i < n {
			if err := batch.Flush(); err != nil {
				return c.Redact(fmt.Errorf("insert %d rows into %s: send block: %w", n, name, err))
			}
		}
	}
	if i != n {
		return fmt.Errorf("insert into %s: %d rows given, %d said", name, i, n)
	}
	err = batch.Send()
	release()
	if err != nil {
		return c.Redact(fmt.Errorf("insert %d rows into %s: %w", n, name, err))
	}
	return nil
}
