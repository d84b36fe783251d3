package spool_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
	"github.com/readsync/readsync/sink/sinktest/historytest"
	"github.com/readsync/readsync/sink/spool"
)

// migrated is a test database with readsync's tables, and a connection
// to it.
func migrated(t *testing.T) (*sinktest.DB, *clickhouse.ClickHouse) {
	t.Helper()
	db := sinktest.New(t)
	ch := historytest.OpenSink(t, db.DSN)
	if err := ch.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, ch
}

// exec runs a statement in db, {db} standing for its name.
func exec(t *testing.T, db *sinktest.DB, q string) {
	t.Helper()
	q = strings.ReplaceAll(q, "{db}", "`"+db.Name+"`")
	if err := db.Conn.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// walletView is a view of the user's on projects that takes every wallet
// address for a number: the server refuses a project whose address is
// not one, for what the write holds, and takes every other write.
const walletView = "CREATE MATERIALIZED VIEW {db}.wallets ENGINE = MergeTree ORDER BY id " +
	"AS SELECT id, toUInt64(wallet_address) AS wallet FROM {db}.projects"

// projectBatch is one project with one message and its snapshot: 3 rows.
func projectBatch(id int64, wallet string) *sink.Batch {
	at := sink.TimeOf(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	return &sink.Batch{
		Projects:  []sink.Project{{ID: id, NFT: "p.eth", WalletAddress: wallet, CreateAt: at, FetchedAt: at, Version: 9}},
		Messages:  []sink.Message{{ProjectID: id, ID: 1, Receivers: []string{}, CreateAt: at, FetchedAt: at, Version: 9}},
		Snapshots: []sink.Snapshot{{ProjectID: id, MessageID: 1, SnapshotAt: at, FetchedAt: at, ReadCount: 1, Total: 2, Percent: 50, Version: 9}},
	}
}

// logBuffer collects a spool's JSON log lines.
type logBuffer struct{ apptest.LockedBuffer }

// lines returns the log's lines whose msg contains msg, decoded.
func (b *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if s, _ := m["msg"].(string); strings.Contains(s, msg) {
			out = append(out, m)
		}
	}
	return out
}

// openLogged opens a spool in dir that logs into the returned buffer.
func openLogged(t *testing.T, dir string) (*spool.Spool, *logBuffer) {
	t.Helper()
	log := &logBuffer{}
	return reopen(t, dir, log), log
}

// reopen opens a spool in dir that logs into log, as a new process would.
func reopen(t *testing.T, dir string, log *logBuffer) *spool.Spool {
	t.Helper()
	s, err := spool.Open(dir, 1<<30, slog.New(slog.NewJSONHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// put spools each batch and returns the entries' names, in order.
func put(t *testing.T, s *spool.Spool, batches ...*sink.Batch) []string {
	t.Helper()
	before := entryNames(t, s.Dir())
	for _, b := range batches {
		if err := s.PutBatch(b); err != nil {
			t.Fatal(err)
		}
	}
	var added []string
	for _, n := range entryNames(t, s.Dir()) {
		if !slices.Contains(before, n) {
			added = append(added, n)
		}
	}
	return added
}

// entryNames lists the entries in dir.
func entryNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".json.gz") && de.Type().IsRegular() {
			names = append(names, de.Name())
		}
	}
	return names
}

// snapshotsOf counts the stored snapshots of a project.
func snapshotsOf(t *testing.T, db *sinktest.DB, project int64) uint64 {
	t.Helper()
	var n uint64
	q := "SELECT count() FROM " + db.Table("message_read_snapshots") + " WHERE project_id = ?"
	if err := db.Conn.QueryRow(context.Background(), q, project).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// flushToQuarantine flushes the spool in dir into w QuarantineAfter times,
// each time as a new process would (as --flush-spool does), so that the
// refusals add up on disk. The spool holds three entries, the middle one,
// bad, refused for what it holds: the first flush delivers the two around
// it, and bad goes into quarantine/ at the last flush only, leaving no
// refusal count behind, with a warning at each flush and one ERROR line.
// It returns the spool the last flush used, and that line.
func flushToQuarantine(t *testing.T, dir string, s *spool.Spool, log *logBuffer, w sink.Writer, bad string) (*spool.Spool, map[string]any) {
	t.Helper()
	for i := 1; i <= spool.QuarantineAfter; i++ {
		if i > 1 {
			s.Close()
			s = reopen(t, dir, log)
		}
		n, err := s.Flush(context.Background(), w)
		if want := map[bool]int{true: 2, false: 0}[i == 1]; n != want || err != nil {
			t.Fatalf("flush %d = %d, %v; want %d delivered and no error", i, n, err, want)
		}
		st := s.Stats()
		if quarantined := i == spool.QuarantineAfter; quarantined != (st.Quarantined == 1) || quarantined != (st.Entries == 0) {
			t.Fatalf("after flush %d: %+v; want the refused entry quarantined at flush %d only", i, st, spool.QuarantineAfter)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "quarantine", bad)); err != nil {
		t.Fatalf("refused entry not in quarantine/: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".refusals.json")); !os.IsNotExist(err) {
		t.Errorf("refusal counts kept for an entry no longer in the queue: %v", err)
	}
	if warned := log.lines(t, "refused a spooled entry for what it holds"); len(warned) != spool.QuarantineAfter {
		t.Errorf("%d warnings of a refusal, want one per flush; log:\n%s", len(warned), log)
	}
	moved := log.lines(t, "moved aside")
	if len(moved) != 1 {
		t.Fatalf("%d lines saying an entry was moved aside, want 1; log:\n%s", len(moved), log)
	}
	m := moved[0]
	if m["level"] != "ERROR" || m["entry"] != bad || !strings.Contains(m["retry"].(string), "--retry-quarantined") {
		t.Errorf("the quarantine's line is not an ERROR naming the file %s and the way to retry it: %v", bad, m)
	}
	return s, m
}

// A spool holding an entry the server refuses for what it holds, between
// two it takes: the good ones land at the first flush, the bad one stays
// until its QuarantineAfter-th refusal and is then moved into quarantine/,
// with an ERROR naming the file, its table, its rows and the server's
// message. Each flush is a new process's, as with --flush-spool: the
// refusals add up on disk. Retried while the cause remains, it stays;
// retried once the cause is gone, it is delivered. No row is deleted on
// the way.
func TestRefusedEntryIsQuarantinedAndRetried(t *testing.T) {
	db, ch := migrated(t)
	exec(t, db, walletView)
	dir := t.TempDir()
	s, log := openLogged(t, dir)
	names := put(t, s, projectBatch(1, "1"), projectBatch(2, "0xdead"), projectBatch(3, "3"))
	bad := names[1]
	ctx := context.Background()

	s, m := flushToQuarantine(t, dir, s, log, ch, bad)
	if got := []uint64{snapshotsOf(t, db, 1), snapshotsOf(t, db, 2), snapshotsOf(t, db, 3)}; !slices.Equal(got, []uint64{1, 0, 1}) {
		t.Errorf("snapshots of projects 1, 2, 3: %v; want the entries around the refused one delivered", got)
	}
	if m["table"] != "projects" || m["rows"] != float64(3) || !strings.Contains(m["err"].(string), "Cannot parse string '0xdead'") {
		t.Errorf("the quarantine's line does not name table projects, 3 rows and the server's message: %v", m)
	}

	// The cause remains: the entry stays where it is.
	if n, err := s.RetryQuarantined(ctx, ch); n != 0 || err != nil {
		t.Fatalf("retry with the view still there = %d, %v; want nothing delivered, no error", n, err)
	}
	if again := log.lines(t, "refused a quarantined spool entry again"); len(again) != 1 || again[0]["level"] != "ERROR" || again[0]["entry"] != bad {
		t.Errorf("want one ERROR naming %s refused again; log:\n%s", bad, log)
	}
	if st := s.Stats(); st.Quarantined != 1 {
		t.Fatalf("after a refused retry: %+v; want the entry still quarantined", st)
	}

	exec(t, db, "DROP TABLE {db}.wallets")
	if n, err := s.RetryQuarantined(ctx, ch); n != 1 || err != nil {
		t.Fatalf("retry once the cause is gone = %d, %v; want 1 delivered", n, err)
	}
	if got := snapshotsOf(t, db, 2); got != 1 {
		t.Errorf("%d snapshots of the retried entry's project, want 1", got)
	}
	if st := s.Stats(); st.Quarantined != 0 || st.Entries != 0 {
		t.Errorf("after the retry: %+v; want nothing left", st)
	}
	if left := entryNames(t, filepath.Join(dir, "quarantine")); len(left) != 0 {
		t.Errorf("quarantine/ still holds %v", left)
	}
}

// scheduleEnum makes the schedule column of message_read_snapshots an
// Enum8 of the schedules of its day, as an operator might by hand to save
// space. clickhouse-go converts each value to its column's type itself:
// it refuses a row of a schedule added since before sending it, with an
// error of its own rather than the server's (sink.Unconvertible), and
// hangs up in the middle of the INSERT.
const scheduleEnum = "ALTER TABLE {db}.message_read_snapshots MODIFY COLUMN schedule Enum8('hourly' = 1, 'daily' = 2)"

// scheduled is projectBatch's rows written by a pass of schedule.
func scheduled(id int64, schedule string) *sink.Batch {
	b := projectBatch(id, strconv.FormatInt(id, 10))
	b.Schedule = schedule
	return b
}

// schedulesOf reads back "project schedule" for each stored snapshot row.
func schedulesOf(t *testing.T, db *sinktest.DB) []string {
	t.Helper()
	return sinktest.Lines(t, db.Conn, "SELECT concat(toString(project_id), ' ', toString(schedule)) FROM "+
		db.Table("message_read_snapshots")+" ORDER BY project_id")
}

// A spool holding an entry the driver cannot convert, between two it
// converts, fares as one holding an entry the server refuses: the good
// ones land at the first flush, and the bad one stays until its
// QuarantineAfter-th refusal, then goes into quarantine/ with an ERROR
// naming the file, its table, its rows, the driver's message and what to
// do. Once the column has its type back, the entry is delivered whole.
func TestUnconvertibleEntryIsQuarantined(t *testing.T) {
	db, _ := migrated(t)
	exec(t, db, scheduleEnum)
	dsn := db.DSN
	if sinktest.Lacks(sinktest.SurvivesKilledClient) {
		// The driver's hang-up may leave the server's last packets
		// unread, and reset the connection: such a server is reached
		// through a proxy, which never passes a reset on.
		dsn = db.NewProxy(t).DSN
	}
	ch := historytest.OpenSink(t, dsn)
	dir := t.TempDir()
	s, log := openLogged(t, dir)
	names := put(t, s, scheduled(1, "hourly"), scheduled(2, "weekly"), scheduled(3, "daily"))
	bad := names[1]

	s, m := flushToQuarantine(t, dir, s, log, ch, bad)
	if got := schedulesOf(t, db); !slices.Equal(got, []string{"1 hourly", "3 daily"}) {
		t.Errorf("snapshot rows %q; want those of the entries around the unconvertible one", got)
	}
	if m["table"] != "message_read_snapshots" || m["rows"] != float64(3) ||
		!strings.Contains(m["err"].(string), `unknown element "weekly"`) || !strings.Contains(m["fix"].(string), "docs/clickhouse.md") {
		t.Errorf("the quarantine's line does not name table message_read_snapshots, 3 rows, the driver's message and a fix: %v", m)
	}

	exec(t, db, "ALTER TABLE {db}.message_read_snapshots MODIFY COLUMN schedule String")
	if n, err := s.RetryQuarantined(context.Background(), ch); n != 1 || err != nil {
		t.Fatalf("retry once the column has its type back = %d, %v; want 1 delivered", n, err)
	}
	if got := schedulesOf(t, db); !slices.Equal(got, []string{"1 hourly", "2 weekly", "3 daily"}) {
		t.Errorf("snapshot rows %q; want every entry's", got)
	}
	if st := s.Stats(); st.Quarantined != 0 || st.Entries != 0 {
		t.Errorf("after the retry: %+v; want nothing left", st)
	}
}

// A refusal every write meets is about the server, not the entries: a
// read-only user sees its flush stop at the first entry, as in an outage,
// however often it flushes, and nothing is quarantined.
func TestRefusalOfEveryWriteQuarantinesNothing(t *testing.T) {
	db, _ := migrated(t)
	reader := historytest.OpenSink(t, db.ReaderDSN(t))
	s, log := openLogged(t, t.TempDir())
	put(t, s, projectBatch(1, "1"), projectBatch(2, "2"))
	for i := range spool.QuarantineAfter + 1 {
		n, err := s.Flush(context.Background(), reader)
		if _, refused := sink.Refused(err); n != 0 || !refused {
			t.Fatalf("flush %d as a read-only user = %d, %v; want a refusal", i+1, n, err)
		}
		if sink.RefusedForContent(err) {
			t.Fatalf("flush %d: %v taken for a refusal of what the entry holds", i+1, err)
		}
	}
	if st := s.Stats(); st.Entries != 2 || st.Quarantined != 0 {
		t.Errorf("stats %+v; want both entries waiting, none quarantined; log:\n%s", st, log)
	}
}

// Without proof that the server takes other entries, no entry is moved
// aside, however often it is refused: a view that throws on every row
// refuses every entry, and a flush stops after a few in a row. Once an
// entry is delivered beside them, they go to quarantine/ at once, having
// been refused often enough; the new entry went first, being never
// refused.
func TestQuarantineNeedsAnotherEntryDelivered(t *testing.T) {
	db, ch := migrated(t)
	exec(t, db, walletView)
	s, log := openLogged(t, t.TempDir())
	put(t, s, projectBatch(1, "0x1"), projectBatch(2, "0x2"), projectBatch(3, "0x3"), projectBatch(4, "0x4"))
	ctx := context.Background()
	for i := range 3 * spool.QuarantineAfter {
		if n, err := s.Flush(ctx, ch); n != 0 || !sink.RefusedForContent(err) {
			t.Fatalf("flush %d = %d, %v; want it stopped by refusals of what the entries hold", i+1, n, err)
		}
	}
	if st := s.Stats(); st.Entries != 4 || st.Quarantined != 0 {
		t.Fatalf("stats %+v; want all 4 entries waiting, none quarantined; log:\n%s", st, log)
	}
	// Every entry has been tried: a flush stops after a few in a row, and
	// the next starts with those it has not tried yet.
	tried := map[string]bool{}
	for _, l := range log.lines(t, "refused a spooled entry for what it holds") {
		tried[l["entry"].(string)] = true
	}
	if len(tried) != 4 {
		t.Errorf("%d entries tried, want all 4; log:\n%s", len(tried), log)
	}

	put(t, s, projectBatch(5, "5"))
	n, err := s.Flush(ctx, ch)
	if n != 1 || err == nil {
		t.Fatalf("flush with a good entry = %d, %v; want it delivered, then refusals", n, err)
	}
	if snapshotsOf(t, db, 5) != 1 {
		t.Errorf("the good entry did not land")
	}
	if st := s.Stats(); st.Quarantined == 0 || st.Quarantined+st.Entries != 4 {
		t.Errorf("stats %+v; want the entries refused again quarantined, the others waiting", st)
	}
	for range 2 {
		if _, err := s.Flush(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Quarantined != 4 || st.Entries != 0 {
		t.Errorf("stats %+v; want all 4 refused entries quarantined", st)
	}
}
