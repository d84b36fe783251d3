package check_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/internal/check"
	"github.com/readsync/readsync/internal/shard"
	"github.com/readsync/readsync/sync"
)

// fakeUpstream knows the projects of its names, and counts the requests.
type fakeUpstream struct {
	projects map[string]int64
	mu       gosync.Mutex
	asked    []string
}

func (f *fakeUpstream) ProjectDetails(_ context.Context, nft string) (apiclient.Project, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, nft)
	id, ok := f.projects[nft]
	if !ok {
		return apiclient.Project{}, fmt.Errorf("nft %q: %w", nft, apiclient.ErrNotRegistered)
	}
	return apiclient.Project{ID: id}, nil
}

func config(t *testing.T, out *bytes.Buffer, up *fakeUpstream, names ...string) check.Config {
	return check.Config{
		Out:           out,
		SchedulesFile: "schedules.yaml",
		Schedules:     []sync.Schedule{{Name: "hourly", NFTNames: names}},
		SpoolDir:      filepath.Join(t.TempDir(), "spool"),
		SpoolMaxBytes: 1 << 20,
		Shares:        shard.All(),
		APIBaseURL:    "https://api.example",
		Concurrency:   2,
		NewAPI: func(observe func(op, outcome string, d time.Duration)) (check.Details, error) {
			return &observed{up, observe}, nil
		},
	}
}

// observed calls observe for every request, as the API client does for
// every attempt.
type observed struct {
	up      *fakeUpstream
	observe func(op, outcome string, d time.Duration)
}

func (o *observed) ProjectDetails(ctx context.Context, nft string) (apiclient.Project, error) {
	o.observe("project_details", "ok", 0)
	return o.up.ProjectDetails(ctx, nft)
}

// Without ClickHouse (--dry-run), a check asks for the first name only,
// one line a part.
func TestFirstName(t *testing.T) {
	var out bytes.Buffer
	up := &fakeUpstream{projects: map[string]int64{"a.eth": 7}}
	if got := check.Run(context.Background(), config(t, &out, up, "a.eth", "b.eth"), true, false); got != check.OK {
		t.Errorf("outcome %v, want OK:\n%s", got, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, prefix := range []string{`config: ok (schedules.yaml: 1 schedules, 2 nft names)`, `api: ok (https://api.example: nft "a.eth" is project 7, `, `clickhouse: skipped (--dry-run)`} {
		if i >= len(lines) || !strings.HasPrefix(lines[i], prefix) {
			t.Errorf("line %d: want %q:\n%s", i+1, prefix, out.String())
		}
	}
	if len(up.asked) != 1 {
		t.Errorf("asked for %q, want the first name only", up.asked)
	}
}

// With allNames, every name is asked for, and each one that fails has its
// line, in the file's order.
func TestAllNames(t *testing.T) {
	var out bytes.Buffer
	up := &fakeUpstream{projects: map[string]int64{"a.eth": 1, "c.eth": 3}}
	if got := check.Run(context.Background(), config(t, &out, up, "a.eth", "b.eth", "c.eth", "d.eth"), true, true); got != check.Failed {
		t.Errorf("outcome %v, want Failed:\n%s", got, out.String())
	}
	for _, want := range []string{
		"api: nft \"b.eth\": FAILED: ",
		"api: nft \"d.eth\": FAILED: ",
		"api: FAILED: 2 of 4 nft names of schedules.yaml failed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Index(out.String(), `"b.eth"`) > strings.Index(out.String(), `"d.eth"`) {
		t.Errorf("failed names out of the file's order:\n%s", out.String())
	}
	out.Reset()
	up.projects["b.eth"], up.projects["d.eth"] = 2, 4
	if got := check.Run(context.Background(), config(t, &out, up, "a.eth", "b.eth", "c.eth", "d.eth"), true, true); got != check.OK ||
		!strings.Contains(out.String(), "api: ok (https://api.example: all 4 nft names are registered projects, ") || !strings.Contains(out.String(), ", 4 requests)") {
		t.Errorf("outcome %v, want OK with 4 requests:\n%s", got, out.String())
	}
}

// An unknown variable fails the configuration before anything is asked.
func TestUnknownVariable(t *testing.T) {
	var out bytes.Buffer
	up := &fakeUpstream{}
	c := config(t, &out, up, "a.eth")
	c.Unknown = []string{"READSYNC_CONCURENCY is not a readsync variable (did you mean READSYNC_CONCURRENCY?)"}
	if got := check.Run(context.Background(), c, false, false); got != check.ConfigError || !strings.HasPrefix(out.String(), "config: FAILED: READSYNC_CONCURENCY") {
		t.Errorf("outcome %v, want ConfigError:\n%s", got, out.String())
	}
	if len(up.asked) != 0 {
		t.Errorf("asked for %q after a configuration error", up.asked)
	}
}

// A StatefulSet's pod reports its share, or why it cannot read it.
func TestKubernetes(t *testing.T) {
	var out bytes.Buffer
	c := config(t, &out, &fakeUpstream{projects: map[string]int64{"a.eth": 1}}, "a.eth")
	c.Member = &shard.Member{Pod: "readsync-1", Set: "readsync", Ordinal: 1}
	c.Shares = shard.NewStatefulSet(*c.Member, replicas{n: 3}, slog.New(slog.DiscardHandler), nil)
	if got := check.Run(context.Background(), c, true, false); got != check.OK ||
		!strings.Contains(out.String(), "kubernetes: ok (StatefulSet readsync has 3 replicas; pod readsync-1 takes shard 1/3)") {
		t.Errorf("outcome %v:\n%s", got, out.String())
	}
	out.Reset()
	c.Shares = shard.NewStatefulSet(*c.Member, replicas{err: errors.New("HTTP 403 Forbidden")}, slog.New(slog.DiscardHandler), nil)
	if got := check.Run(context.Background(), c, true, false); got != check.Failed || !strings.Contains(out.String(), "kubernetes: FAILED: ") {
		t.Errorf("outcome %v, want Failed:\n%s", got, out.String())
	}
}

type replicas struct {
	n   int32
	err error
}

func (r replicas) Replicas(context.Context, string) (int32, error) { return r.n, r.err }

// A schedules file without names leaves the upstream nothing to ask.
func TestNoNames(t *testing.T) {
	var out bytes.Buffer
	up := &fakeUpstream{}
	if got := check.Run(context.Background(), config(t, &out, up), true, false); got != check.OK || !strings.Contains(out.String(), "api: skipped (no names to ask for)") {
		t.Errorf("outcome %v, want OK with the API skipped:\n%s", got, out.String())
	}
}
