// Package spool keeps rows that could not be written to the database in
// files on local disk until they can be. Each entry is one file, written
// atomically (a temporary file, fsynced, then renamed), so a crash leaves
// either a whole entry or none. Entries are replayed oldest first (those
// the database refused before last) and deleted only after the database
// confirmed them: delivery is at least once, and the tables' upsert keys
// make a repeat harmless. An entry the database keeps refusing for what
// it holds, or one that cannot be decoded, is moved into the folder
// quarantine/ of the directory, where it waits for an operator; the spool
// never deletes rows it did not deliver.
package spool

import (
	"bufio"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/readsync/readsync/sink"
)

// ErrFull is returned by Put when an entry would take the spool past its
// size limit. The entry is not stored.
var ErrFull = errors.New("spool is full")

// ErrLocked is returned by Open when another process has the spool
// directory open.
var ErrLocked = errors.New("in use by another readsync process")

// entry is the content of one spool file: the rows under the JSON names of
// the row structs' fields, which are the tables' column names.
//
// The version rule: Format is 1 since the first release. A release that
// only adds fields (a new column) keeps the number: an older entry decodes
// with the new field at its zero value, and the column's default must
// agree. A change an older reader would misread (a field renamed, retyped
// or given a new meaning) bumps Format; readers keep decoding every format
// up to their own, converting older ones, and refuse a newer one, which
// they move aside rather than misread. A test replays entries the first
// release wrote (testdata/release-0.1.0).
type entry struct {
	Format int         `json:"format"`
	Batch  *sink.Batch `json:"batch,omitempty"`
	Run    *sink.Run   `json:"run,omitempty"`
}

// rows is how many rows the entry holds, a run record counting as one.
func (e entry) rows() int {
	n := 0
	if e.Batch != nil {
		n += e.Batch.Len()
	}
	if e.Run != nil {
		n++
	}
	return n
}

const (
	format       = 1
	suffix       = ".json.gz"
	tmpPrefix    = ".tmp-"
	lockName     = ".lock"
	flushTimeout = 2 * time.Minute
)

// Spool is a directory of pending entries. It is safe for concurrent use;
// flushes are serialised.
type Spool struct {
	dir      string
	maxBytes int64
	log      *slog.Logger
	lock     *os.File // holds the directory's lock until Close

	mu    sync.Mutex // guards bytes, files and quarantined
	bytes int64
	files int
	// quarantined counts the entries in quarantine/.
	quarantined int

	flushMu sync.Mutex

	refusedRows    atomic.Int64
	refusedEntries atomic.Int64
}

// Stats describes a spool at one moment.
type Stats struct {
	// Entries and Bytes are what waits on disk.
	Entries int
	Bytes   int64
	// Quarantined is how many entries wait in quarantine/ for an operator
	// (see Flush and RetryQuarantined); they are not in Entries and Bytes.
	Quarantined int
	// RefusedEntries and RefusedRows count what Put turned away because the
	// spool was full, since Open.
	RefusedEntries int64
	RefusedRows    int64
}

// Open prepares dir (creating it when missing), takes its lock, removes
// temporary files a crash left behind, moves what an earlier release set
// aside in corrupt/ into quarantine/, and takes stock of the entries
// waiting there. It fails when dir cannot be written, and with an error
// wrapping ErrLocked when another process holds the lock: two processes
// replaying and removing the same entries would deliver them twice and
// each remove what the other is writing. The caller must Close the spool
// to release the lock; the end of the process releases it too.
func Open(dir string, maxBytes int64, log *slog.Logger) (*Spool, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("spool directory %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s, err := open(dir, maxBytes, log)
	if err != nil {
		lock.Close()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// lockDir takes the exclusive lock on dir's lock file without waiting.
// flock(2) locks belong to the open file, so the kernel releases the lock
// when the process ends, however it ends: a crash leaves no stale lock.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("spool directory %s: lock file: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("spool directory %s is %w (it holds the lock on %s); "+
				"give each process its own READSYNC_SPOOL_DIR", dir, ErrLocked, path)
		}
		return nil, fmt.Errorf("spool directory %s: lock %s: %w", dir, path, err)
	}
	return f, nil
}

// open takes stock of dir, which the caller has locked.
func open(dir string, maxBytes int64, log *slog.Logger) (*Spool, error) {
	s := &Spool{dir: dir, maxBytes: maxBytes, log: log}
	if err := adoptLegacyQuarantine(dir); err != nil {
		return nil, err
	}
	n, err := countEntries(filepath.Join(dir, quarantineDir))
	if err != nil {
		return nil, err
	}
	s.quarantined = n
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("spool directory %s: %w", dir, err)
	}
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.HasPrefix(name, tmpPrefix):
			// An entry whose write never completed; its rows were never
			// reported as spooled, so nothing is lost by removing it. The
			// lock guarantees no other process is still writing it.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("spool directory %s: remove unfinished entry: %w", dir, err)
			}
		case isEntry(de):
			info, err := de.Info()
			if err != nil {
				return nil, fmt.Errorf("spool directory %s: %w", dir, err)
			}
			s.bytes += info.Size()
			s.files++
		}
	}
	// Prove the directory writable now rather than when the database is
	// already down and the rows have nowhere else to go.
	probe, err := os.CreateTemp(dir, tmpPrefix+"probe-*")
	if err != nil {
		return nil, fmt.Errorf("spool directory %s is not writable: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return s, nil
}

// Close releases the directory's lock. The spool must not be used after.
func (s *Spool) Close() error {
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close()
	s.lock = nil
	return err
}

// Dir is the spool's directory.
func (s *Spool) Dir() string { return s.dir }

// QuarantineDir is the folder of the spool's directory that holds the
// entries moved aside (see Flush).
func (s *Spool) QuarantineDir() string { return filepath.Join(s.dir, quarantineDir) }

// Inspection is what Inspect found in a spool directory.
type Inspection struct {
	// Exists is false for a directory Open has yet to create.
	Exists bool
	// Entries and Bytes are what waits to be replayed.
	Entries int
	Bytes   int64
	// Quarantined is how many entries wait for an operator in
	// quarantine/, or in the corrupt/ of an earlier release, which Open
	// moves into quarantine/.
	Quarantined int
}

// Inspect reports on dir without changing it, for a check that may run
// beside the process that owns the spool: it takes no lock, removes
// nothing and creates nothing. Writability is asked of access(2) rather
// than proven by writing: of dir, or, when dir does not exist yet, of the
// nearest directory above it that does, where Open would create it.
func Inspect(dir string) (Inspection, error) {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENOTDIR):
		parent := dir
		// ENOTDIR: a path under a file, which the loop reaches.
		for (errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)) && filepath.Dir(parent) != parent {
			parent = filepath.Dir(parent)
			info, err = os.Stat(parent)
		}
		if err != nil {
			return Inspection{}, fmt.Errorf("spool directory %s: %w", dir, err)
		}
		if !info.IsDir() {
			return Inspection{}, fmt.Errorf("spool directory %s cannot be created: %s is not a directory", dir, parent)
		}
		if err := unix.Access(parent, unix.W_OK|unix.X_OK); err != nil {
			return Inspection{}, fmt.Errorf("spool directory %s cannot be created in %s: %w", dir, parent, err)
		}
		return Inspection{}, nil
	case err != nil:
		return Inspection{}, fmt.Errorf("spool directory %s: %w", dir, err)
	case !info.IsDir():
		return Inspection{}, fmt.Errorf("spool directory %s is not a directory", dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return Inspection{}, fmt.Errorf("spool directory %s is not writable: %w", dir, err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return Inspection{}, fmt.Errorf("spool directory %s: %w", dir, err)
	}
	in := Inspection{Exists: true}
	for _, de := range des {
		if isEntry(de) {
			fi, err := de.Info()
			if err != nil {
				continue // replayed and removed meanwhile by the process that owns it
			}
			in.Entries++
			in.Bytes += fi.Size()
		}
	}
	for _, sub := range []string{quarantineDir, legacyCorruptDir} {
		n, err := countEntries(filepath.Join(dir, sub))
		if err != nil {
			return Inspection{}, err
		}
		in.Quarantined += n
	}
	return in, nil
}

// Stats returns the spool's current size and refusal counters.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Entries:        s.files,
		Bytes:          s.bytes,
		Quarantined:    s.quarantined,
		RefusedEntries: s.refusedEntries.Load(),
		RefusedRows:    s.refusedRows.Load(),
	}
}

// PutBatch stores a copy of b's rows. It returns an error wrapping ErrFull
// when the spool has no room for them.
func (s *Spool) PutBatch(b *sink.Batch) error {
	return s.put(entry{Format: format, Batch: b}, "rows", fmt.Sprintf("%d rows", b.Len()), int64(b.Len()))
}

// PutRun stores a run record.
func (s *Spool) PutRun(r sink.Run) error {
	return s.put(entry{Format: format, Run: &r}, "run", "run record "+r.RunID, 1)
}

// put stores e under a name of the given kind; what describes it in errors.
func (s *Spool) put(e entry, kind, what string, rows int64) error {
	tmp, size, err := s.writeTemp(e)
	if err != nil {
		return fmt.Errorf("spool %s: %w", what, err)
	}
	s.mu.Lock()
	if s.bytes+size > s.maxBytes {
		used := s.bytes
		s.mu.Unlock()
		os.Remove(tmp)
		s.refusedEntries.Add(1)
		s.refusedRows.Add(rows)
		return fmt.Errorf("spool %s (%d bytes): %w: %d of %d bytes used in %s",
			what, size, ErrFull, used, s.maxBytes, s.dir)
	}
	// Reserve the room before renaming, so concurrent puts cannot together
	// pass the limit.
	s.bytes += size
	s.files++
	s.mu.Unlock()

	final := filepath.Join(s.dir, entryName(kind))
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		s.release(size)
		return fmt.Errorf("spool %s: %w", what, err)
	}
	if err := syncDir(s.dir); err != nil {
		// The file is complete but its name may not survive a power cut;
		// keep it and say so, since the rows are most likely safe.
		s.log.Warn("spool directory not synced", "dir", s.dir, "err", err)
	}
	return nil
}

// writeTemp writes e compressed to a new temporary file, fsynced, and
// returns its path and size.
func (s *Spool) writeTemp(e entry) (string, int64, error) {
	f, err := os.CreateTemp(s.dir, tmpPrefix+"*")
	if err != nil {
		return "", 0, err
	}
	fail := func(err error) (string, int64, error) {
		f.Close()
		os.Remove(f.Name())
		return "", 0, err
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	zw := gzip.NewWriter(bw)
	enc := json.NewEncoder(zw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return fail(fmt.Errorf("encode: %w", err))
	}
	if err := zw.Close(); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	info, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), info.Size(), nil
}

// entryName sorts by creation time, so a flush replays oldest first; the
// random part keeps two entries of one nanosecond apart.
func entryName(kind string) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%020d-%s-%s%s", time.Now().UnixNano(), kind, hex.EncodeToString(r[:]), suffix)
}

func (s *Spool) release(size int64) {
	s.mu.Lock()
	s.bytes -= size
	s.files--
	s.mu.Unlock()
}

// isEntry tells a whole entry from temporary files, the lock, the
// refusal counts and the quarantine/ directory.
func isEntry(de fs.DirEntry) bool {
	n := de.Name()
	return strings.HasSuffix(n, suffix) && !strings.HasPrefix(n, tmpPrefix) && de.Type().IsRegular()
}

// corruptError is an entry whose content cannot be decoded, as opposed to
// one that cannot be read right now.
type corruptError struct{ err error }

func (e *corruptError) Error() string { return "corrupt entry: " + e.err.Error() }
func (e *corruptError) Unwrap() error { return e.err }

// readEntry decodes one spool file; size is the file's size even when
// decoding fails.
func readEntry(path string) (entry, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return entry{}, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return entry{}, 0, err
	}
	size := info.Size()
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 64<<10))
	if err != nil {
		return entry{}, size, &corruptError{err}
	}
	var e entry
	dec := json.NewDecoder(zr)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return entry{}, size, &corruptError{err}
	}
	if e.Format != format {
		return entry{}, size, &corruptError{fmt.Errorf("format %d, this version reads format %d", e.Format, format)}
	}
	return e, size, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Oldest returns when the oldest entry waiting in the spool was written,
// and false when none waits. It lists the directory: a caller that asks
// often keeps the answer for a while.
func (s *Spool) Oldest() (time.Time, bool, error) {
	names, err := entries(s.dir)
	if err != nil || len(names) == 0 {
		return time.Time{}, false, err
	}
	stamp, _, _ := strings.Cut(names[0], "-")
	ns, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("spool entry %s: name does not start with its time in nanoseconds: %w", names[0], err)
	}
	return time.Unix(0, ns).UTC(), true, nil
}
