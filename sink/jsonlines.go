package sink

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// JSONLines prints rows as JSON lines instead of storing them, for
// --dry-run. Each line is an object with a "table" key naming the table the
// row would go to and the row itself under "row". Every call flushes, so
// the output is complete whenever a call returns. It is safe for concurrent
// use.
type JSONLines struct {
	mu  sync.Mutex
	w   *bufio.Writer
	enc *json.Encoder
}

// NewJSONLines returns a sink that writes to w.
func NewJSONLines(w io.Writer) *JSONLines {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &JSONLines{w: bw, enc: enc}
}

type line[T any] struct {
	Table string `json:"table"`
	Row   T      `json:"row"`
}

// Write prints every row of the batch.
func (j *JSONLines) Write(_ context.Context, b *Batch) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, p := range b.Projects {
		if err := j.enc.Encode(line[Project]{"projects", p}); err != nil {
			return fmt.Errorf("print projects row: %w", err)
		}
	}
	for _, m := range b.Messages {
		if err := j.enc.Encode(line[Message]{"messages", m}); err != nil {
			return fmt.Errorf("print messages row: %w", err)
		}
	}
	for _, s := range b.Snapshots {
		if err := j.enc.Encode(line[Snapshot]{"message_read_snapshots", s}); err != nil {
			return fmt.Errorf("print message_read_snapshots row: %w", err)
		}
	}
	return j.flush()
}

// RecordRun prints the pass record.
func (j *JSONLines) RecordRun(_ context.Context, r Run) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.enc.Encode(line[Run]{"sync_runs", r}); err != nil {
		return fmt.Errorf("print sync_runs row: %w", err)
	}
	return j.flush()
}

func (j *JSONLines) flush() error {
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("write dry-run output: %w", err)
	}
	return nil
}
