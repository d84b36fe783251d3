package sync

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	gosync "sync"
	"unicode/utf8"
)

// A schedule's names come from up to three sources, read at every pass
// (Resolver), their union taken, each name once:
//
//   - nft_names, the list inline in the schedules file;
//   - nft_names_file, a file of one name a line, which another job or a
//     mounted volume may change between two passes;
//   - nft_names_query, a SELECT of one String column that readsync runs,
//     read-only, on its own ClickHouse.
//
// A list is read from its source as it is used and held once, in a
// slice of its names' text: no parsed document, no per-name state.

// The keys of a schedule's sources in the schedules file.
const (
	SourceInline = "nft_names"
	SourceFile   = "nft_names_file"
	SourceQuery  = "nft_names_query"
)

// MaxNameLength is the most characters a name can have: a domain name's
// limit. A longer line in a names file is not a name.
const MaxNameLength = 253

// NameQuerier runs a schedule's nft_names_query: a read-only SELECT of
// one String column, each of whose values it hands to fn as it reads them.
// Package clickhouse's ClickHouse is one.
type NameQuerier interface {
	QueryNames(ctx context.Context, query string, fn func(string) error) error
}

// SourceCount is how many names one source of a schedule resolved to.
type SourceCount struct {
	Source string // SourceInline, SourceFile or SourceQuery
	Names  int
}

// SourceError is the failure of one source of a schedule.
type SourceError struct {
	Schedule string
	Source   string // SourceInline, SourceFile or SourceQuery
	// Where is the file's path or the query's first line.
	Where string
	Err   error
}

func (e *SourceError) Error() string {
	return fmt.Sprintf("schedule %q: %s %s: %v", e.Schedule, e.Source, e.Where, e.Err)
}

// Unwrap returns the cause.
func (e *SourceError) Unwrap() error { return e.Err }

// Sources returns the keys of the sources the schedule has, in the order
// they are read.
func (s Schedule) Sources() []string {
	var out []string
	if s.NFTNames != nil {
		out = append(out, SourceInline)
	}
	if s.NamesFile != "" {
		out = append(out, SourceFile)
	}
	if s.NamesQuery != "" {
		out = append(out, SourceQuery)
	}
	return out
}

// Dynamic reports whether the schedule's names can change without a
// restart: it has a file or a query among its sources.
func (s Schedule) Dynamic() bool { return s.NamesFile != "" || s.NamesQuery != "" }

// where names a source of the schedule in errors and logs.
func (s Schedule) where(source string) string {
	switch source {
	case SourceFile:
		return s.NamesFile
	case SourceQuery:
		first, _, _ := strings.Cut(strings.TrimSpace(s.NamesQuery), "\n")
		return fmt.Sprintf("%q", first)
	}
	return "in the schedules file"
}

// ResolveNames reads the schedule's names from each of its sources and
// returns their union, each name once, and how many each source gave. The
// error, a *SourceError or several joined, names every source that
// failed; the names are then those of the sources that did not.
func ResolveNames(ctx context.Context, s Schedule, q NameQuerier) ([]string, []SourceCount, error) {
	var (
		names  []string
		counts []SourceCount
		errs   []error
	)
	add := func(n string) error { names = append(names, n); return nil }
	for _, src := range s.Sources() {
		before := len(names)
		var err error
		switch src {
		case SourceInline:
			names = append(names, s.NFTNames...)
		case SourceFile:
			err = readNamesFile(s.NamesFile, add)
		case SourceQuery:
			if q == nil {
				err = errors.New("no ClickHouse to run it on (a dry run has none)")
				break
			}
			err = q.QueryNames(ctx, s.NamesQuery, func(n string) error {
				if strings.TrimSpace(n) == "" {
					return nil // a row without a name names nothing
				}
				return add(n)
			})
		}
		if err != nil {
			names = names[:before]
			errs = append(errs, &SourceError{Schedule: s.Name, Source: src, Where: s.where(src), Err: err})
			continue
		}
		counts = append(counts, SourceCount{Source: src, Names: len(names) - before})
	}
	if len(s.Sources()) > 1 || s.NFTNames == nil {
		// Sorted, each name once: a set would cost a map entry a name.
		slices.Sort(names)
		names = slices.Compact(names)
		names = slices.Clip(names)
	}
	return names, counts, errors.Join(errs...)
}

// readNamesFile hands fn each name of the file at path: one a line,
// surrounding blanks trimmed; blank lines and lines whose first character
// is # are skipped. A line that is not UTF-8, or longer than a name can
// be, is an error naming the line.
func readNamesFile(path string, fn func(string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	// A line a few times longer than a name is read whole, to say how
	// long it is; one longer still stops the scan with ErrTooLong.
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if !utf8.Valid(b) {
			return fmt.Errorf("line %d: not UTF-8", line)
		}
		name := strings.TrimSpace(string(b))
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		if n := utf8.RuneCountInString(name); n > MaxNameLength {
			return fmt.Errorf("line %d: %d characters, longer than a name can be (%d)", line, n, MaxNameLength)
		}
		if err := fn(name); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("a line longer than a name can be (%d characters): %w", MaxNameLength, err)
		}
		return err
	}
	return nil
}

// Resolver resolves schedules' names at each pass and keeps, per
// schedule, the last list that resolved whole: a pass at which a source
// fails runs on it. It is safe for concurrent use.
type Resolver struct {
	query NameQuerier

	mu   gosync.Mutex
	last map[string]Resolution
}

// NewResolver returns a Resolver whose queries q runs; nil for none.
func NewResolver(q NameQuerier) *Resolver {
	return &Resolver{query: q, last: map[string]Resolution{}}
}

// Resolution is a schedule's names at a pass.
type Resolution struct {
	Names  []string
	Counts []SourceCount
	// Stale says the names are the last list that resolved, as Err's
	// sources failed now.
	Stale bool
	// Err says which sources failed (see ResolveNames); with no list ever
	// resolved, Names is empty and the pass cannot run.
	Err error
}

// Resolve returns the schedule's names now, or, when a source fails, its
// last list that resolved (Stale, with Err). With none ever resolved, it
// returns Err and no names.
func (r *Resolver) Resolve(ctx context.Context, s Schedule) Resolution {
	names, counts, err := ResolveNames(ctx, s, r.query)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		res := Resolution{Names: names, Counts: counts}
		if s.Dynamic() {
			r.last[s.Name] = res
		}
		return res
	}
	last, ok := r.last[s.Name]
	if !ok {
		return Resolution{Err: err}
	}
	last.Stale, last.Err = true, err
	return last
}

// FailedSources returns the sources err (from ResolveNames) says failed.
func FailedSources(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if se, ok := err.(*SourceError); ok {
			out = append(out, se.Source)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}
