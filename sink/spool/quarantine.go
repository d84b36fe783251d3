package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/readsync/readsync/sink"
)

const (
	// quarantineDir, inside the spool directory, holds the entries a flush
	// will not replay again by itself: those that cannot be decoded, and
	// those the database refused for what they hold (see Flush). They wait
	// there for an operator, unchanged, and RetryQuarantined replays them.
	quarantineDir = "quarantine"
	// legacyCorruptDir is where releases up to 0.4.0 moved the entries they
	// could not decode. Open moves them into quarantineDir.
	legacyCorruptDir = "corrupt"
)

// quarantine moves an entry aside into quarantine/ instead of deleting it:
// its rows may still be delivered once the cause is gone (RetryQuarantined),
// or recovered by hand, and a flush must not stall on it. msg and attrs say
// why, at error level: an operator must act. It reports whether the entry
// left the queue.
func (s *Spool) quarantine(name string, size int64, msg string, attrs ...any) bool {
	dir := filepath.Join(s.dir, quarantineDir)
	err := os.MkdirAll(dir, 0o750)
	if err == nil {
		err = os.Rename(filepath.Join(s.dir, name), filepath.Join(dir, name))
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Gone meanwhile: nothing of it is left to count.
		s.release(size)
		return true
	}
	if err != nil {
		s.log.Error("spool entry could not be moved aside; it stays in the queue", "entry", name, "err", err,
			slog.Group("why", append([]any{"msg", msg}, attrs...)...))
		return false
	}
	for _, d := range []string{dir, s.dir} {
		if err := syncDir(d); err != nil {
			s.log.Warn("spool directory not synced", "dir", d, "err", err)
		}
	}
	s.mu.Lock()
	s.bytes -= size
	s.files--
	s.quarantined++
	s.mu.Unlock()
	s.log.Error(msg, append([]any{"entry", name, "to", dir}, attrs...)...)
	return true
}

// RetryQuarantined replays every entry in quarantine/ once, oldest first,
// into t and deletes each one after t accepted it: for an operator who
// removed the cause. An entry still refused for what it holds, or still
// unreadable, stays there, and the log says so again. An outage or a
// refusal every write meets stops it. It returns how many entries it
// delivered.
func (s *Spool) RetryQuarantined(ctx context.Context, t sink.Writer) (int, error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	dir := filepath.Join(s.dir, quarantineDir)
	names, err := entries(dir)
	if err != nil {
		return 0, err
	}
	done := 0
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		path := filepath.Join(dir, name)
		e, _, err := readEntry(path)
		var bad *corruptError
		if errors.As(err, &bad) {
			s.log.Error("quarantined spool entry still cannot be decoded; it stays", "entry", name, "dir", dir, "err", err)
			continue
		}
		if err != nil {
			return done, fmt.Errorf("read quarantined entry: %w", err)
		}
		err = s.deliver(ctx, t, e)
		switch {
		case err == nil:
			if err := os.Remove(path); err != nil {
				return done, fmt.Errorf("remove replayed entry %s: %w", path, err)
			}
			s.mu.Lock()
			s.quarantined--
			s.mu.Unlock()
			done++
			s.log.Info("quarantined spool entry delivered", "entry", name, "rows", e.rows())
		case sink.RefusedForContent(err):
			s.log.Error("ClickHouse refused a quarantined spool entry again; it stays", "entry", name, "dir", dir,
				"table", tableOf(err), "rows", e.rows(), "err", err, "fix", sink.Fix(err))
		default:
			return done, fmt.Errorf("replay quarantined entry %s: %w", name, err)
		}
	}
	if done > 0 {
		if err := syncDir(dir); err != nil {
			s.log.Warn("spool directory not synced", "dir", dir, "err", err)
		}
	}
	return done, nil
}

// adoptLegacyQuarantine moves the entries an earlier release set aside in
// corrupt/ into quarantine/, so that one folder holds every entry waiting
// for an operator and RetryQuarantined tries them too (a later release
// may read a format an earlier one could not). corrupt/ is removed once
// empty; anything else in it stays.
func adoptLegacyQuarantine(dir string) error {
	legacy := filepath.Join(dir, legacyCorruptDir)
	names, err := entries(legacy)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		to := filepath.Join(dir, quarantineDir)
		if err := os.MkdirAll(to, 0o750); err != nil {
			return fmt.Errorf("spool directory %s: %w", dir, err)
		}
		for _, name := range names {
			if err := os.Rename(filepath.Join(legacy, name), filepath.Join(to, name)); err != nil {
				return fmt.Errorf("spool directory %s: move %s into %s: %w", dir, filepath.Join(legacy, name), to, err)
			}
		}
		if err := syncDir(to); err != nil {
			return fmt.Errorf("spool directory %s: %w", dir, err)
		}
	}
	// rmdir(2) refuses a directory that holds anything, and a missing
	// one is what is wanted.
	_ = os.Remove(legacy)
	return nil
}

// countEntries counts the entries in dir; none when dir does not exist.
func countEntries(dir string) (int, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("spool directory %s: %w", dir, err)
	}
	n := 0
	for _, de := range des {
		if isEntry(de) {
			n++
		}
	}
	return n, nil
}
