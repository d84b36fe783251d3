package sync

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"io"
	"os"

	"github.com/readsync/readsync/sink"
)

// spillFile holds the snapshot rows of one long list on local disk until
// the list has arrived whole. A list that breaks off must leave no
// snapshot behind: under FINAL a project has all of its snapshots at a
// tick or none, since a tick with some of them reads as a drop in every
// trend line. Keeping them on disk rather than in memory bounds a pass's
// memory whatever a project sent.
//
// The file is removed from the directory as soon as it is created and
// lives on only through its descriptor, so nothing is left behind when
// the process ends, however it ends. One spillFile serves one fetch
// worker, one name after the other; it is not safe for concurrent use.
type spillFile struct {
	dir  string // "" means os.TempDir()
	f    *os.File
	bw   *bufio.Writer
	enc  *gob.Encoder
	rows int
}

// put appends rows to the file, creating it on first use.
func (s *spillFile) put(rows []sink.Snapshot) error {
	if len(rows) == 0 {
		return nil
	}
	if s.f == nil {
		if err := s.create(); err != nil {
			return err
		}
	}
	if s.enc == nil {
		s.enc = gob.NewEncoder(s.bw)
	}
	if err := s.enc.Encode(rows); err != nil {
		return fmt.Errorf("spill %d snapshot rows to %s: %w", len(rows), s.f.Name(), err)
	}
	s.rows += len(rows)
	return nil
}

func (s *spillFile) create() error {
	f, err := os.CreateTemp(s.dir, ".spill-*")
	if err != nil {
		return fmt.Errorf("spill snapshot rows of a long list to disk: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return fmt.Errorf("spill snapshot rows of a long list to disk: unlink %s: %w", f.Name(), err)
	}
	s.f, s.bw = f, bufio.NewWriterSize(f, 64<<10)
	return nil
}

// each hands the spilled rows to fn in the pieces they were put in, then
// empties the file. The slice passed to fn is reused between calls.
func (s *spillFile) each(fn func([]sink.Snapshot)) error {
	if s.rows == 0 {
		return nil
	}
	defer s.reset()
	if err := s.bw.Flush(); err != nil {
		return fmt.Errorf("spill file %s: %w", s.f.Name(), err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("spill file %s: %w", s.f.Name(), err)
	}
	dec := gob.NewDecoder(bufio.NewReaderSize(s.f, 64<<10))
	var rows []sink.Snapshot
	for read := 0; read < s.rows; read += len(rows) {
		rows = rows[:0]
		if err := dec.Decode(&rows); err != nil {
			return fmt.Errorf("read back spilled snapshot rows from %s: %w", s.f.Name(), err)
		}
		fn(rows)
	}
	return nil
}

// reset empties the file for the next list, or for a list delivered again
// from its start.
func (s *spillFile) reset() {
	s.rows, s.enc = 0, nil
	if s.f == nil {
		return
	}
	s.bw.Reset(s.f)
	// A failure here shows on the next put or read as a wrong row count
	// or a decoding error, which fails that name rather than mixing rows.
	_ = s.f.Truncate(0)
	_, _ = s.f.Seek(0, io.SeekStart)
}

// close releases the file and with it the disk space.
func (s *spillFile) close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
