// Package sink is where synced rows go: the rows (Project, Message,
// Snapshot, Run, in a Batch), the Writer they are written to, JSON lines
// for a dry run, and Refused, which tells a server that refuses a
// statement from one that is down. It knows nothing of the upstream API,
// nor of ClickHouse's tables: package clickhouse writes the rows there,
// with chconn (the connection), schema (the tables and views) and derived
// (the rows derived from them).
package sink

import (
	"context"
	"time"
	"unsafe"
)

// Project is one row of the projects table.
type Project struct {
	ID            int64  `json:"id"`
	NFT           string `json:"nft"`
	Name          string `json:"name"`
	Description   string `json:"description"`
	Logo          string `json:"logo"`
	Type          int64  `json:"type"`
	WalletAddress string `json:"wallet_address"`
	CreateAt      Time   `json:"create_at"`
	// Raw is the project record's JSON as the upstream sent it.
	Raw       string `json:"raw"`
	FetchedAt Time   `json:"fetched_at"`
	// Version orders writes of one key; the highest wins under FINAL.
	Version uint64 `json:"version"`
}

// Message is one row of the messages table.
type Message struct {
	ProjectID        int64    `json:"project_id"`
	ID               int64    `json:"id"`
	Sender           string   `json:"sender"`
	RecvGroup        string   `json:"recv_group"`
	Receivers        []string `json:"receivers"`
	Subject          string   `json:"subject"`
	Type             int64    `json:"type"`
	IsAllSubscribers bool     `json:"is_all_subscribers"`
	CreateAt         Time     `json:"create_at"`
	FetchedAt        Time     `json:"fetched_at"`
	Version          uint64   `json:"version"`
}

// Snapshot is one row of message_read_snapshots: a message's read
// statistics as observed for one snapshot time. The two times sit together
// so that the row packs into 56 bytes.
type Snapshot struct {
	ProjectID  int64   `json:"project_id"`
	MessageID  int64   `json:"message_id"`
	SnapshotAt Time    `json:"snapshot_at"`
	FetchedAt  Time    `json:"fetched_at"`
	ReadCount  uint64  `json:"read_count"`
	Total      uint64  `json:"total"`
	Percent    float64 `json:"percent"`
	Version    uint64  `json:"version"`
}

// Run is one row of sync_runs: the record of one pass.
type Run struct {
	RunID      string    `json:"run_id"`
	Schedule   string    `json:"schedule"`
	Trigger    string    `json:"trigger"`
	SnapshotAt time.Time `json:"snapshot_at"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	NFTTotal   uint64    `json:"nft_total"`
	NFTOK      uint64    `json:"nft_ok"`
	NFTFailed  uint64    `json:"nft_failed"`
	Messages   uint64    `json:"messages"`
	Status     string    `json:"status"`
	Error      string    `json:"error"`
	// Shard is the share of the names the process that ran the tick
	// took ("i/n"), empty when it took every name.
	Shard string `json:"shard"`
}

// NameFailure is one row of name_failures: an nft name that a pass asked
// for and did not read, and why.
// Its schedule is its batch's.
type NameFailure struct {
	RunID      string    `json:"run_id"`
	SnapshotAt time.Time `json:"snapshot_at"`
	Shard      string    `json:"shard"`
	NFT        string    `json:"nft"`
	// Stage is the request that failed: "details" or "list".
	Stage string `json:"stage"`
	// Kind is the cause's class (see package sync's FailureKind).
	Kind string `json:"kind"`
	// HTTPStatus is the status of the last answer, 0 when there was none.
	HTTPStatus uint16 `json:"http_status"`
	// Attempts counts the requests made of the failing stage.
	Attempts uint32 `json:"attempts"`
	Error    string `json:"error"`
}

// NameSuccess is one row of name_successes: an nft name that a pass read.
// Its schedule is its batch's.
type NameSuccess struct {
	NFT        string    `json:"nft"`
	SnapshotAt time.Time `json:"snapshot_at"`
}

// Writer is where rows and run records are written: ClickHouse, or JSON
// lines for a dry run. A pass writes to one, and the spool replays into
// one what it kept.
type Writer interface {
	// Write writes a batch; rows written before are harmless to write
	// again, since every table keeps one row per key.
	Write(ctx context.Context, b *Batch) error
	// RecordRun writes a pass's record.
	RecordRun(ctx context.Context, r Run) error
}

// TableError is a write that failed at one table: Writers return it so
// that whoever holds the rows (the spool) can say which table did not
// take them. Its message is Err's, which names the table already.
type TableError struct {
	// Table is the table's name in its database.
	Table string
	// Rows is how many rows the write to Table carried.
	Rows int
	Err  error
}

func (e *TableError) Error() string { return e.Err.Error() }
func (e *TableError) Unwrap() error { return e.Err }

// Batch is a set of rows written together: one INSERT per non-empty table.
type Batch struct {
	Projects  []Project
	Messages  []Message
	Snapshots []Snapshot
	// Schedule names the schedule whose pass fetched the rows, empty for
	// a backfill: reads gained count the ticks of the schedule that gave
	// a project no snapshot. Spool entries of earlier releases have none.
	Schedule string `json:",omitempty"`
	// NameFailures and NameSuccesses record how each name of the batch's
	// pass fared, written and spooled with its rows. Spool entries of
	// earlier releases have none.
	NameFailures  []NameFailure `json:",omitempty"`
	NameSuccesses []NameSuccess `json:",omitempty"`
}

// Len is the number of data rows in the batch: projects, messages and
// snapshots (the names' outcomes are counted by Outcomes).
func (b *Batch) Len() int { return len(b.Projects) + len(b.Messages) + len(b.Snapshots) }

// Outcomes is the number of name outcome rows in the batch.
func (b *Batch) Outcomes() int { return len(b.NameFailures) + len(b.NameSuccesses) }

// Bytes estimates the memory the batch's rows hold: each row's own size
// and the text of its strings.
func (b *Batch) Bytes() int {
	n := len(b.Projects)*int(unsafe.Sizeof(Project{})) + len(b.Messages)*int(unsafe.Sizeof(Message{})) +
		len(b.Snapshots)*int(unsafe.Sizeof(Snapshot{}))
	for i := range b.Projects {
		p := &b.Projects[i]
		n += len(p.NFT) + len(p.Name) + len(p.Description) + len(p.Logo) + len(p.WalletAddress) + len(p.Raw)
	}
	n += len(b.NameFailures)*int(unsafe.Sizeof(NameFailure{})) + len(b.NameSuccesses)*int(unsafe.Sizeof(NameSuccess{}))
	for i := range b.NameFailures {
		f := &b.NameFailures[i]
		n += len(f.RunID) + len(f.Shard) + len(f.NFT) + len(f.Stage) + len(f.Kind) + len(f.Error)
	}
	for i := range b.NameSuccesses {
		n += len(b.NameSuccesses[i].NFT)
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		n += len(m.Sender) + len(m.RecvGroup) + len(m.Subject) + len(m.Receivers)*int(unsafe.Sizeof(""))
		for _, r := range m.Receivers {
			n += len(r)
		}
	}
	return n
}

// Reset empties the batch, keeping its capacity for the next one.
func (b *Batch) Reset() {
	b.Projects = b.Projects[:0]
	b.Messages = b.Messages[:0]
	b.Snapshots = b.Snapshots[:0]
	b.NameFailures = b.NameFailures[:0]
	b.NameSuccesses = b.NameSuccesses[:0]
}
