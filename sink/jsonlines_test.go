package sink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
)

func TestJSONLines(t *testing.T) {
	var out bytes.Buffer
	j := sink.NewJSONLines(&out)
	at := sink.TimeOf(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := &sink.Batch{
		Projects:  []sink.Project{{ID: 9007199254740993, NFT: "a&b.eth"}},
		Messages:  []sink.Message{{ProjectID: 9007199254740993, ID: 1}},
		Snapshots: []sink.Snapshot{{ProjectID: 9007199254740993, MessageID: 1, SnapshotAt: at, ReadCount: 1, Total: 2, Percent: 50}},
	}
	if err := j.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := j.RecordRun(context.Background(), sink.Run{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	wantTables := []string{"projects", "messages", "message_read_snapshots", "sync_runs"}
	if len(lines) != len(wantTables) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(wantTables), out.String())
	}
	for i, l := range lines {
		var v struct {
			Table string         `json:"table"`
			Row   map[string]any `json:"row"`
		}
		d := json.NewDecoder(strings.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatalf("line %d is not JSON: %v", i, err)
		}
		if v.Table != wantTables[i] {
			t.Errorf("line %d table %q, want %q", i, v.Table, wantTables[i])
		}
	}
	if !strings.Contains(lines[0], `"id":9007199254740993`) || !strings.Contains(lines[0], `"nft":"a&b.eth"`) {
		t.Errorf("project line lost the exact id or escaped the name: %s", lines[0])
	}
}
