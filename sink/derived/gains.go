package derived

import (
	"cmp"
	"fmt"
)

// Reads gained: how many reads a project's messages gained at each
// snapshot, since each message's previous snapshot. A message counts at a
// snapshot with its newest write there (the highest version), like in
// message_read_latest and project_read_daily; a message seen for the first
// time counts from 0; a message no longer listed adds nothing. Summed over
// a day's snapshots this is, per message, its last count of the day minus
// its last count before the day, so the daily view adds up with
// project_read_daily.
//
// 18.16 has no window functions, and a difference of consecutive values
// at query time would cost the whole history anyway, so readsync
// computes the gains when it writes (refreshGains) and stores one row
// per refresh in the gains rollup; the views pick, per project and
// snapshot, the row of the highest key. The key grows with the rows the
// refresh saw, as the day rollup's does (package schema's
// dayrefresh.go): of two refreshes, one saw every row the other saw and
// maybe more, and then its key is at least as high, and higher when its
// values differ. Refreshes may so land in any order, twice, or from two
// processes at once.

// snapRow is a message's row at a snapshot, as a refresh reads it.
type snapRow struct {
	at      uint32
	version uint64
	reads   uint64
	total   uint64
}

// gainSum accumulates one project snapshot's gains over its messages.
type gainSum struct {
	messages, newMessages uint64
	// reads wraps like the counts it sums; the true gain fits an Int64.
	reads  uint64
	prevAt uint32
	// The key's sums: each message's version at the snapshot, and its
	// previous snapshot's time and version. Versions are nanoseconds, so
	// their sums take 128 bits.
	versions     uint128
	prevAts      uint64
	prevVersions uint128
	// The newest write at the snapshot: its version, and its messages
	// with their reads and totals summed. A message whose newest row at
	// the snapshot is older (a tick run twice that listed it only the
	// first time) is not in it.
	topVersion                      uint64
	topMessages, topReads, topTotal uint64
}

// add counts message row cur, whose previous row is prev (nil for none).
func (g *gainSum) add(cur snapRow, prev *snapRow) {
	g.messages++
	g.versions.add(cur.version)
	g.reads += cur.reads
	switch {
	case cur.version > g.topVersion:
		g.topVersion, g.topMessages, g.topReads, g.topTotal = cur.version, 1, cur.reads, cur.total
	case cur.version == g.topVersion:
		g.topMessages++
		g.topReads += cur.reads
		g.topTotal += cur.total
	}
	if prev == nil {
		g.newMessages++
		return
	}
	g.reads -= prev.reads
	g.prevAt = max(g.prevAt, prev.at)
	g.prevAts += uint64(prev.at)
	g.prevVersions.add(prev.version)
}

// gainKeyFormat starts every key this release writes. Keys of the
// release that introduced the gains start with the message count's first
// digit, always 0, so a key computed again from the same rows (by
// migration 7, which adds the newest write's values to every row) ranks
// above the one it replaces.
const gainKeyFormat = "1"

// key is the refresh key: the format, the message count, then the sums,
// then whether a schedule was known and the ticks it missed, each
// fixed-width so that the strings compare as the tuples do. With more rows
// seen, the messages at the snapshot can only grow in number or in version,
// and their previous rows only move later or to a higher version; when
// none of it moved, the values are the same (the newest write and the
// schedule are those of the same rows), but for the ticks: a refresh that
// saw more of them recorded wins.
func (g *gainSum) key(scheduled bool, missed uint64) string {
	known := 0
	if scheduled {
		known = 1
	}
	return fmt.Sprintf("%s%020d%020d%020d%020d%020d%020d%d%020d", gainKeyFormat, g.messages, g.versions.hi, g.versions.lo,
		g.prevAts, g.prevVersions.hi, g.prevVersions.lo, known, missed)
}

// gainScan computes the gains of target snapshots from a project's rows in
// order of (message, snapshot, version), and the rows before them.
type gainScan struct {
	// targets are the snapshots whose gains are wanted, per project;
	// all, when set, makes every snapshot one.
	targets map[int64]map[uint32]bool
	all     bool
	// priors are messages' newest rows before the rows scanned.
	priors map[msgKey]snapRow
	sums   map[gainTarget]*gainSum

	// writes are the newest write read at each snapshot: its version and
	// schedule.
	writes map[gainTarget]newestWrite

	key  msgKey
	prev *snapRow
	cur  snapRow
	open bool
}

// newestWrite is the version and the schedule of the newest write a scan
// read at a snapshot.
type newestWrite struct {
	version  uint64
	schedule string
}

type msgKey struct{ project, message int64 }

type gainTarget struct {
	project int64
	at      uint32
}

// compare orders targets by project, then snapshot, so that a refresh's
// rows, and so its INSERT's deduplication token, do not depend on map
// order.
func (a gainTarget) compare(b gainTarget) int {
	return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.at, b.at))
}

func newGainScan(targets map[int64]map[uint32]bool, all bool) *gainScan {
	return &gainScan{targets: targets, all: all, priors: map[msgKey]snapRow{}, sums: map[gainTarget]*gainSum{}, writes: map[gainTarget]newestWrite{}}
}

// take takes the next row read, noting its snapshot's newest write.
func (s *gainScan) take(r scannedRow) {
	t := gainTarget{r.key.project, r.row.at}
	if w, ok := s.writes[t]; !ok || r.row.version > w.version {
		s.writes[t] = newestWrite{r.row.version, r.schedule}
	}
	s.row(r.key, r.row)
}

// row takes the next row; rows come ordered by project, message, snapshot
// and version, so the last row of a snapshot is its newest write.
func (s *gainScan) row(k msgKey, r snapRow) {
	if s.open && k == s.key && r.at == s.cur.at {
		s.cur = r
		return
	}
	s.closeSnapshot()
	if !s.open || k != s.key {
		s.key, s.prev = k, nil
		if p, ok := s.priors[k]; ok {
			s.prev = &p
		}
	}
	s.cur, s.open = r, true
}

// closeSnapshot counts the message's row at the snapshot just read.
func (s *gainScan) closeSnapshot() {
	if !s.open {
		return
	}
	if s.all || s.targets[s.key.project][s.cur.at] {
		t := gainTarget{s.key.project, s.cur.at}
		g := s.sums[t]
		if g == nil {
			g = &gainSum{}
			s.sums[t] = g
		}
		g.add(s.cur, s.prev)
	}
	cur := s.cur
	s.prev = &cur
}

// finish ends the scan.
func (s *gainScan) finish() { s.closeSnapshot(); s.open = false }
