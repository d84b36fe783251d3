package spool_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/spool"
)

// target records what a flush delivers; fail makes it refuse entries.
type target struct {
	mu        gosync.Mutex
	snapshots []sink.Snapshot
	schedules []string // of each batch
	runs      []sink.Run
	fail      error
	failAfter int // entries accepted before fail applies
}

func (t *target) accept() error {
	if t.fail != nil && t.failAfter == 0 {
		return t.fail
	}
	t.failAfter--
	return nil
}

func (t *target) Write(_ context.Context, b *sink.Batch) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.accept(); err != nil {
		return err
	}
	t.snapshots = append(t.snapshots, b.Snapshots...)
	t.schedules = append(t.schedules, b.Schedule)
	return nil
}

func (t *target) RecordRun(_ context.Context, r sink.Run) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.accept(); err != nil {
		return err
	}
	t.runs = append(t.runs, r)
	return nil
}

func batch(ids ...int64) *sink.Batch {
	at := sink.TimeOf(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	b := &sink.Batch{Projects: []sink.Project{{ID: 1, NFT: "café-☕.eth", Raw: `{"id":1}`, CreateAt: at, FetchedAt: at, Version: 9}}}
	for _, id := range ids {
		b.Messages = append(b.Messages, sink.Message{ProjectID: 1, ID: id, Receivers: []string{"a", "b"}, CreateAt: at, FetchedAt: at, Version: 9})
		b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: 1, MessageID: id, SnapshotAt: at, ReadCount: uint64(id), Total: 10, Percent: 12.34, FetchedAt: at, Version: 9})
	}
	return b
}

func open(t *testing.T, dir string, max int64) *spool.Spool {
	t.Helper()
	s, err := spool.Open(dir, max, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPutThenFlushDeliversEverythingOnceInOrder(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<30)
	in := batch(1, 2, 3)
	in.Schedule = "hourly" // what reads gained count missed ticks by
	if err := s.PutBatch(in); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBatch(batch(4)); err != nil {
		t.Fatal(err)
	}
	run := sink.Run{RunID: "r1", Status: "ok", SnapshotAt: time.Unix(1_763_726_400, 0).UTC()}
	if err := s.PutRun(run); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Entries != 3 || st.Bytes <= 0 {
		t.Fatalf("stats %+v, want 3 entries", st)
	}
	// A new process finds the entries the last one left.
	s.Close()
	s = open(t, dir, 1<<30)
	if st := s.Stats(); st.Entries != 3 {
		t.Fatalf("reopened stats %+v, want 3 entries", st)
	}
	var got target
	n, err := s.Flush(context.Background(), &got)
	if err != nil || n != 3 {
		t.Fatalf("Flush = %d, %v; want 3, nil", n, err)
	}
	var ids []int64
	for _, sn := range got.snapshots {
		ids = append(ids, sn.MessageID)
	}
	if !slices.Equal(ids, []int64{1, 2, 3, 4}) {
		t.Errorf("replayed snapshots %v, want 1 2 3 4 in order", ids)
	}
	if got.snapshots[0] != in.Snapshots[0] {
		t.Errorf("snapshot changed on its way through the spool:\n got %+v\nwant %+v", got.snapshots[0], in.Snapshots[0])
	}
	if !slices.Equal(got.schedules, []string{"hourly", ""}) {
		t.Errorf("batches' schedules %q, want hourly then none", got.schedules)
	}
	if len(got.runs) != 1 || got.runs[0] != run {
		t.Errorf("runs %+v, want %+v", got.runs, run)
	}
	if st := s.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("after flush stats %+v, want empty", st)
	}
	if n, err := s.Flush(context.Background(), &got); n != 0 || err != nil || len(got.snapshots) != 4 {
		t.Errorf("second flush delivered again: %d, %v", n, err)
	}
}

func TestFlushKeepsWhatTheTargetRefused(t *testing.T) {
	s := open(t, t.TempDir(), 1<<30)
	for i := int64(1); i <= 3; i++ {
		if err := s.PutBatch(batch(i)); err != nil {
			t.Fatal(err)
		}
	}
	down := &target{fail: errors.New("connection refused"), failAfter: 1}
	n, err := s.Flush(context.Background(), down)
	if n != 1 || err == nil || !strings.Contains(err.Error(), "replay spooled entry") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Flush = %d, %v; want 1 and the refusal", n, err)
	}
	if st := s.Stats(); st.Entries != 2 {
		t.Fatalf("stats %+v, want the 2 refused entries kept", st)
	}
	var up target
	if n, err := s.Flush(context.Background(), &up); n != 2 || err != nil {
		t.Fatalf("Flush = %d, %v; want 2, nil", n, err)
	}
	if len(up.snapshots) != 2 || up.snapshots[0].MessageID != 2 {
		t.Errorf("delivered %+v, want messages 2 and 3", up.snapshots)
	}
}

func TestFullSpoolRefusesAndCounts(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<30)
	if err := s.PutBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	one := s.Stats().Bytes
	s.Close()
	s = open(t, dir, one+one/2) // room for the one entry there, not two
	err := s.PutBatch(batch(2))
	if !errors.Is(err, spool.ErrFull) {
		t.Fatalf("PutBatch on a full spool: %v, want ErrFull", err)
	}
	if !strings.Contains(err.Error(), "spool 3 rows (") || !strings.Contains(err.Error(), dir) {
		t.Errorf("error does not say what was refused and where: %v", err)
	}
	st := s.Stats()
	if st.Entries != 1 || st.RefusedEntries != 1 || st.RefusedRows != 3 {
		t.Errorf("stats %+v, want 1 entry kept, 1 entry and 3 rows refused", st)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 2 || filepath.Base(files[0]) != ".lock" {
		t.Errorf("files %v, want the lock and the first entry only", files)
	}
}

func TestConcurrentPutsStayWithinTheLimit(t *testing.T) {
	dir := t.TempDir()
	probe := open(t, t.TempDir(), 1<<30)
	if err := probe.PutBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	one := probe.Stats().Bytes
	s := open(t, dir, 5*one+one/2)
	var wg gosync.WaitGroup
	for range 20 {
		wg.Go(func() { _ = s.PutBatch(batch(1)) })
	}
	wg.Wait()
	st := s.Stats()
	if st.Entries != 5 || st.RefusedEntries != 15 || st.Bytes > 5*one+one/2 {
		t.Errorf("stats %+v, want 5 kept and 15 refused", st)
	}
}

func TestOpenRemovesUnfinishedWrites(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<30)
	if err := s.PutBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	// A crash between creating the temporary file and renaming it.
	torn := filepath.Join(dir, ".tmp-123456")
	if err := os.WriteFile(torn, []byte("\x1f\x8b\x08half"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir, 1<<30)
	if _, err := os.Stat(torn); !os.IsNotExist(err) {
		t.Errorf("unfinished entry still there: %v", err)
	}
	var got target
	if n, err := s.Flush(context.Background(), &got); n != 1 || err != nil {
		t.Errorf("Flush = %d, %v; want the one whole entry", n, err)
	}
}

func TestCorruptEntriesAreMovedAsideNotDeleted(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<30)
	if err := s.PutBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "00000000000000000001-rows-deadbeef.json.gz")
	if err := os.WriteFile(bad, []byte("not gzip"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir, 1<<30)
	var got target
	n, err := s.Flush(context.Background(), &got)
	if n != 1 || err != nil || len(got.snapshots) != 1 {
		t.Fatalf("Flush = %d, %v; want the good entry delivered past the bad one", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "quarantine", filepath.Base(bad))); err != nil {
		t.Errorf("corrupt entry not kept aside: %v", err)
	}
	if st := s.Stats(); st.Entries != 0 || st.Bytes != 0 || st.Quarantined != 1 {
		t.Errorf("stats %+v, want empty, one entry quarantined", st)
	}
	// A retry leaves it where it is: it still cannot be decoded.
	if n, err := s.RetryQuarantined(context.Background(), &got); n != 0 || err != nil {
		t.Errorf("RetryQuarantined = %d, %v; want nothing delivered, no error", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "quarantine", filepath.Base(bad))); err != nil {
		t.Errorf("corrupt entry gone after a retry: %v", err)
	}
}

func TestOpenFailsOnAnUnwritableDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := spool.Open(filepath.Join(file, "spool"), 1<<30, nil)
	if err == nil || !strings.Contains(err.Error(), "spool directory") {
		t.Fatalf("Open under a file: %v, want an error naming the spool directory", err)
	}
}

func TestEntryNamesSayOnlyTimeAndKind(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<30)
	b := batch(1)
	b.Projects[0].NFT = "secret-looking.eth"
	if err := s.PutBatch(b); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRun(sink.Run{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		n := de.Name()
		if n == ".lock" {
			continue
		}
		if !strings.HasSuffix(n, ".json.gz") || !(strings.Contains(n, "-rows-") || strings.Contains(n, "-run-")) || strings.Contains(n, "secret") {
			t.Errorf("entry name %q", n)
		}
	}
}

// One process owns a spool directory at a time: a second Open fails,
// naming the directory, until the first spool is closed.
func TestOneOwnerAtATime(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	s := open(t, dir, 1<<30)
	_, err := spool.Open(dir, 1<<30, nil)
	if !errors.Is(err, spool.ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open: %v, want ErrLocked naming %s", err, dir)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, dir, 1<<30)
}

// Inspect reports what waits and changes nothing: an unfinished entry
// another process may be writing stays, and no file appears, even beside
// the process that holds the lock.
func TestInspectChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<30)
	if err := s.PutBatch(batch(1, 2)); err != nil {
		t.Fatal(err)
	}
	writing := filepath.Join(dir, ".tmp-424242")
	if err := os.WriteFile(writing, []byte("\x1f\x8b\x08half"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := listing(t, dir)
	in, err := spool.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := s.Stats(); !in.Exists || in.Entries != 1 || in.Bytes != want.Bytes {
		t.Errorf("Inspect = %+v, want 1 entry of %d bytes", in, want.Bytes)
	}
	if after := listing(t, dir); !slices.Equal(before, after) {
		t.Errorf("Inspect changed the directory: %v, then %v", before, after)
	}
}

func TestInspect(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "a", "b")
	for _, tc := range []struct {
		name, dir, err string
	}{
		{"missing, creatable", missing, ""},
		{"a file", file, "is not a directory"},
		{"under a file", filepath.Join(file, "spool"), "cannot be created: " + file + " is not a directory"},
		{"read-only", readOnly, "is not writable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "read-only" && os.Geteuid() == 0 {
				t.Skip("root may write anywhere")
			}
			in, err := spool.Inspect(tc.dir)
			if tc.err == "" {
				if err != nil || in.Exists {
					t.Errorf("Inspect = %+v, %v; want a directory still to create", in, err)
				}
				if _, err := os.Stat(tc.dir); !os.IsNotExist(err) {
					t.Errorf("Inspect created %s", tc.dir)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.dir) {
				t.Errorf("Inspect: %v, want an error naming %s that says %q", err, tc.dir, tc.err)
			}
		})
	}
}

func listing(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// Oldest says when the oldest waiting entry was written, and that none
// waits in an empty spool.
func TestOldest(t *testing.T) {
	s, err := spool.Open(t.TempDir(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, ok, err := s.Oldest(); ok || err != nil {
		t.Fatalf("empty spool: oldest %t, %v; want none", ok, err)
	}
	before := time.Now()
	if err := s.PutRun(sink.Run{RunID: "first"}); err != nil {
		t.Fatal(err)
	}
	between := time.Now()
	if err := s.PutRun(sink.Run{RunID: "second"}); err != nil {
		t.Fatal(err)
	}
	at, ok, err := s.Oldest()
	if err != nil || !ok || at.Before(before) || at.After(between) {
		t.Errorf("oldest %v (%t, %v), want the first entry's time, between %v and %v", at, ok, err, before, between)
	}
}
