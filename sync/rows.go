package sync

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/sink"
)

// rowBuilder turns one project's API records into rows, applying the rules
// for odd values. Rather than logging each odd value, which would flood the
// log for a project with thousands of messages, it counts them per kind and
// reports one line per kind when the name is done.
type rowBuilder struct {
	loc        *time.Location
	snapshotAt sink.Time
	fetchedAt  sink.Time
	version    uint64
	warnings   map[string]*warning
	interned   map[string]string
}

// maxInterned bounds the strings one builder keeps for intern: the values
// worth sharing repeat across a project's messages, so a few suffice, and a
// project whose values never repeat must not grow the table.
const maxInterned = 64

type warning struct {
	count     int
	messageID int64
	value     string
}

func newRowBuilder(loc *time.Location, snapshotAt, fetchedAt time.Time, version uint64) *rowBuilder {
	return &rowBuilder{loc: loc, snapshotAt: sink.TimeOf(snapshotAt), fetchedAt: sink.TimeOf(fetchedAt), version: version}
}

func (b *rowBuilder) warn(kind string, messageID int64, value string) {
	if b.warnings == nil {
		b.warnings = make(map[string]*warning)
	}
	w, ok := b.warnings[kind]
	if !ok {
		w = &warning{messageID: messageID, value: value}
		b.warnings[kind] = w
	}
	w.count++
}

// checkpoint returns a function that forgets every warning collected after
// this call, for a list that is delivered again from its start.
func (b *rowBuilder) checkpoint() (restore func()) {
	saved := make(map[string]warning, len(b.warnings))
	for k, w := range b.warnings {
		saved[k] = *w
	}
	return func() {
		b.warnings = make(map[string]*warning, len(saved))
		for k, w := range saved {
			b.warnings[k] = &w
		}
	}
}

// logWarnings reports what warn collected, one line per kind, with the
// first offending message as an example.
func (b *rowBuilder) logWarnings(log *slog.Logger) {
	for kind, w := range b.warnings {
		log.Warn(kind, "count", w.count, "example_message_id", w.messageID, "example_value", w.value)
	}
}

// intern returns a string equal to s that an earlier row of the project
// already holds, when there is one. A project's messages mostly share their
// sender and receiver group; sharing one copy lets the copy the decoder
// made for each message die young instead of living in the batch.
func (b *rowBuilder) intern(s string) string {
	if v, ok := b.interned[s]; ok {
		return v
	}
	if b.interned == nil {
		b.interned = make(map[string]string)
	}
	if len(b.interned) < maxInterned {
		b.interned[s] = s
	}
	return s
}

func (b *rowBuilder) time(kind string, id int64, s string) sink.Time {
	t, err := ParseSourceTime(s, b.loc)
	if err != nil {
		b.warn(kind, id, s)
		return sink.TimeOf(epoch)
	}
	return sink.TimeOf(t)
}

func (b *rowBuilder) project(p apiclient.Project) sink.Project {
	return sink.Project{
		ID:            p.ID,
		NFT:           p.NFT,
		Name:          p.Name,
		Description:   p.Description,
		Logo:          p.Logo,
		Type:          p.Type,
		WalletAddress: p.WalletAddress,
		CreateAt:      b.time("project create_at unusable, stored as 1970-01-01 00:00:00", p.ID, p.CreateAt),
		Raw:           string(p.Raw),
		FetchedAt:     b.fetchedAt,
		Version:       b.version,
	}
}

func (b *rowBuilder) message(projectID int64, m apiclient.Message) sink.Message {
	return sink.Message{
		ProjectID:        projectID,
		ID:               m.ID,
		Sender:           b.intern(m.Sender),
		RecvGroup:        b.intern(m.RecvGroup),
		Receivers:        m.Receivers,
		Subject:          m.Subject,
		Type:             m.Type,
		IsAllSubscribers: m.IsAllSubscribers,
		CreateAt:         b.time("message create_at unusable, stored as 1970-01-01 00:00:00", m.ID, m.CreateAt),
		FetchedAt:        b.fetchedAt,
		Version:          b.version,
	}
}

// snapshot builds the message's read snapshot. A message without read_data
// has no statistics to record: inventing zeros would draw a false drop in
// every trend line, so it gets no snapshot row.
func (b *rowBuilder) snapshot(projectID int64, m apiclient.Message) (sink.Snapshot, bool) {
	rd := m.ReadData
	if rd == nil {
		b.warn("message has no read_data, no snapshot written", m.ID, "null")
		return sink.Snapshot{}, false
	}
	readCount, total := b.count("read_count", m.ID, rd.ReadCount), b.count("total", m.ID, rd.Total)
	percent, err := ParsePercent(string(rd.Percent))
	if err != nil {
		b.warn("percent unparseable, computed from read_count/total", m.ID, string(rd.Percent))
		percent = ComputePercent(readCount, total)
	}
	return sink.Snapshot{
		ProjectID:  projectID,
		MessageID:  m.ID,
		SnapshotAt: b.snapshotAt,
		ReadCount:  readCount,
		Total:      total,
		Percent:    percent,
		FetchedAt:  b.fetchedAt,
		Version:    b.version,
	}, true
}

// count converts an upstream counter to the unsigned column type; a
// negative value cannot be a count and is stored as 0 rather than wrapped.
func (b *rowBuilder) count(field string, id int64, v int64) uint64 {
	if v < 0 {
		b.warn(field+" negative, stored as 0", id, strconv.FormatInt(v, 10))
		return 0
	}
	return uint64(v)
}
