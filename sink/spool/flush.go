package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/readsync/readsync/sink"
)

// QuarantineAfter is how many times the database must refuse an entry for
// what it holds (sink.RefusedForContent) before a flush moves the entry
// into quarantine/, provided the database took another entry since the
// first of them: proof that the refusal concerns the entry, not every
// write. The count is kept on disk, so restarts and one-flush runs such as
// --flush-spool add up.
const QuarantineAfter = 3

// refusedInARow is how many entries in a row a flush lets the database
// refuse for what they hold, none delivered between them, before it stops
// for this time: a refusal every entry meets (every table dropped by hand,
// a view of the user's that throws on every row) concerns the database
// more likely than the entries, and trying each entry at every flush
// would read the whole spool for nothing. Entries refused fewer times go
// first (see flush.order), so the next flush reaches other entries.
const refusedInARow = 3

// Flush replays the entries into t and deletes each one after t accepted
// it, and returns how many entries it delivered. Entries put while a flush
// runs may wait for the next one.
//
// Entries go oldest first, except those the database refused before for
// what they hold, which go after the others, those refused fewer times
// first: every table keeps the highest version of each row, so the order
// of delivery does not change what the tables hold. An outage, or a
// refusal every write meets (a login, a right, a setting: see
// sink.RefusedForContent), stops the flush, leaving the entry and those
// behind it for the next one. A refusal of an entry for what it holds (by
// the server, or by the driver that cannot convert one of its values)
// counts against it and the flush goes on with the next, up to
// refusedInARow in a row. An entry refused QuarantineAfter times, once the
// database was seen to take another entry since its first refusal, is
// moved aside (see quarantine), as is an entry that cannot be decoded.
func (s *Spool) Flush(ctx context.Context, t sink.Writer) (int, error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	names, err := entries(s.dir)
	if err != nil {
		return 0, err
	}
	f := &flush{s: s, t: t, refusals: s.loadRefusals()}
	err = f.replay(ctx, f.order(names))
	f.judge()
	if serr := s.saveRefusals(f.refusals, names); serr != nil {
		// The refusals of this flush go uncounted: an entry waits one
		// flush longer for quarantine, no more.
		s.log.Warn("spool refusal counts not saved", "dir", s.dir, "err", serr)
	}
	if f.done > 0 {
		if err := syncDir(s.dir); err != nil {
			s.log.Warn("spool directory not synced", "dir", s.dir, "err", err)
		}
	}
	return f.done, err
}

// flush is one Flush under way.
type flush struct {
	s        *Spool
	t        sink.Writer
	refusals refusals
	done     int
	// refused are the entries the database refused for what they hold in
	// this flush, in order.
	refused []refusedEntry
}

// refusedEntry is an entry the database refused for what it holds, and
// what the log says of it.
type refusedEntry struct {
	name  string
	size  int64
	table string
	rows  int
	err   error
}

// order is the order of replay: entries refused fewer times first, so
// that those never refused go first and a flush that stops after
// refusedInARow reaches other entries the next time; oldest first among
// equals.
func (f *flush) order(names []string) []string {
	out := slices.Clone(names)
	slices.SortStableFunc(out, func(a, b string) int {
		return f.refusals.times(a) - f.refusals.times(b)
	})
	return out
}

// replay delivers names in order until one stops the flush.
func (f *flush) replay(ctx context.Context, names []string) error {
	s := f.s
	inARow := 0
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		path := filepath.Join(s.dir, name)
		e, size, err := readEntry(path)
		var bad *corruptError
		if errors.As(err, &bad) {
			s.quarantine(name, size, "unreadable spool entry moved aside", "err", err)
			delete(f.refusals, name)
			continue
		}
		if err != nil {
			return fmt.Errorf("read spooled entry: %w", err)
		}
		err = s.deliver(ctx, f.t, e)
		switch {
		case err == nil:
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("remove replayed entry %s: %w", name, err)
			}
			s.release(size)
			delete(f.refusals, name)
			f.done++
			inARow = 0
		case sink.RefusedForContent(err):
			r := f.refusals.count(name)
			re := refusedEntry{name: name, size: size, table: tableOf(err), rows: e.rows(), err: err}
			f.refused = append(f.refused, re)
			s.log.Warn("ClickHouse refused a spooled entry for what it holds; it stays, the entries behind it go on",
				"entry", name, "table", re.table, "rows", re.rows, "refusals", r.Refusals, "quarantine_after", QuarantineAfter, "err", err)
			inARow++
			if inARow == refusedInARow {
				return fmt.Errorf("replay spooled entries: %d refused in a row, the last %s: %w", inARow, name, err)
			}
		default:
			return fmt.Errorf("replay spooled entry %s: %w", name, err)
		}
	}
	return nil
}

// judge moves aside the entries refused in this flush that have been
// refused often enough, once the database has been seen to take another
// entry: in this flush, or in an earlier one since their first refusal.
func (f *flush) judge() {
	if f.done > 0 {
		for _, r := range f.refusals {
			r.Proven = true
		}
	}
	for _, re := range f.refused {
		r, ok := f.refusals[re.name]
		if !ok || r.Refusals < QuarantineAfter || !r.Proven {
			continue
		}
		if f.s.quarantine(re.name, re.size, "spooled entry ClickHouse refused for what it holds moved aside; the entries behind it go on",
			"table", re.table, "rows", re.rows, "refusals", r.Refusals, "err", re.err, "fix", sink.Fix(re.err),
			"retry", "readsync --flush-spool --retry-quarantined, once the cause is gone") {
			delete(f.refusals, re.name)
		}
	}
}

// deliver writes one entry's rows and run record into t.
func (s *Spool) deliver(ctx context.Context, t sink.Writer, e entry) error {
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	if e.Batch != nil {
		if err := t.Write(ctx, e.Batch); err != nil {
			return err
		}
	}
	if e.Run != nil {
		return t.RecordRun(ctx, *e.Run)
	}
	return nil
}

// tableOf is the table a write failed at, "" when the error does not say.
func tableOf(err error) string {
	var te *sink.TableError
	if errors.As(err, &te) {
		return te.Table
	}
	return ""
}

// entries lists the entries in dir, oldest first; none when dir does not
// exist.
func entries(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool directory %s: %w", dir, err)
	}
	var names []string
	for _, de := range des {
		if isEntry(de) {
			names = append(names, de.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}
