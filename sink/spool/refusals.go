package spool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// refusalsName is the file of the spool directory that counts, for each
// entry, the times the database refused it for what it holds. The leading
// dot keeps it out of what any release takes for an entry; a release that
// does not know it leaves it alone.
const refusalsName = ".refusals.json"

// refusalsFormat is the version of the refusals file, by the rule of the
// entries' format (see entry). A file of another format is ignored: the
// counts start again, which delays a quarantine and loses nothing.
const refusalsFormat = 1

// refusal is what the spool remembers of an entry the database refused
// for what it holds.
type refusal struct {
	// Refusals counts the flushes that met the refusal.
	Refusals int `json:"refusals"`
	// Proven is set once the database took another entry since this one's
	// first refusal: the refusal concerns what the entry holds.
	Proven bool `json:"proven"`
}

// refusals are the spool's refusal records by entry name.
type refusals map[string]*refusal

// times is how many times the entry name was refused.
func (r refusals) times(name string) int {
	if rec, ok := r[name]; ok {
		return rec.Refusals
	}
	return 0
}

// count adds a refusal of the entry name and returns its record.
func (r refusals) count(name string) *refusal {
	rec, ok := r[name]
	if !ok {
		rec = &refusal{}
		r[name] = rec
	}
	rec.Refusals++
	return rec
}

type refusalsFile struct {
	Format  int      `json:"format"`
	Entries refusals `json:"entries"`
}

// loadRefusals reads the refusal records; a missing or unreadable file is
// no records, the latter logged.
func (s *Spool) loadRefusals() refusals {
	path := filepath.Join(s.dir, refusalsName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return refusals{}
	}
	var f refusalsFile
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err == nil && f.Format != refusalsFormat {
		err = fmt.Errorf("format %d, this version reads format %d", f.Format, refusalsFormat)
	}
	if err != nil {
		s.log.Warn("spool refusal counts unreadable; they start again", "file", path, "err", err)
		return refusals{}
	}
	if f.Entries == nil {
		return refusals{}
	}
	return f.Entries
}

// saveRefusals writes the records of the entries among names, atomically
// as entries are written; with none, it removes the file.
func (s *Spool) saveRefusals(r refusals, names []string) error {
	keep := refusals{}
	for _, name := range names {
		if rec, ok := r[name]; ok {
			keep[name] = rec
		}
	}
	path := filepath.Join(s.dir, refusalsName)
	if len(keep) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.Marshal(refusalsFile{Format: refusalsFormat, Entries: keep})
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.dir, tmpPrefix+"refusals-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return syncDir(s.dir)
}
