package shard_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/readsync/readsync/internal/shard"
)

func TestParseMember(t *testing.T) {
	for _, tt := range []struct {
		in     string
		want   shard.Member
		ok     bool
		hasErr bool
	}{
		{"readsync-2/statefulset", shard.Member{Pod: "readsync-2", Set: "readsync", Ordinal: 2}, true, false},
		{"prod-readsync-10/statefulset", shard.Member{Pod: "prod-readsync-10", Set: "prod-readsync", Ordinal: 10}, true, false},
		{"2/3", shard.Member{}, false, false},
		{"readsync-2/3", shard.Member{}, false, false},
		{"readsync/statefulset", shard.Member{}, true, true},
		{"-2/statefulset", shard.Member{}, true, true},
		{"readsync-x/statefulset", shard.Member{}, true, true},
		{"$(POD_NAME)/statefulset", shard.Member{}, true, true},
	} {
		got, ok, err := shard.ParseMember(tt.in)
		if got != tt.want || ok != tt.ok || (err != nil) != tt.hasErr {
			t.Errorf("ParseMember(%q) = %+v, %t, %v; want %+v, %t, error %t", tt.in, got, ok, err, tt.want, tt.ok, tt.hasErr)
		}
	}
}

func TestFilter(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	if got := shard.All().Filter(names); len(got) != len(names) {
		t.Errorf("every name: %q", got)
	}
	for _, none := range []shard.Share{{Index: 3, Count: 3}, {Index: 0, Count: 0}} {
		if got := none.Filter(names); len(got) != 0 {
			t.Errorf("share %v: %q, want none", none, got)
		}
	}
	seen := map[string]int{}
	for i := range uint32(3) {
		for _, n := range (shard.Share{Index: i, Count: 3}).Filter(names) {
			seen[n]++
		}
	}
	for _, n := range names {
		if seen[n] != 1 {
			t.Errorf("%q taken by %d of 3 shares", n, seen[n])
		}
	}
}

// scriptedReplicas answers each read with the next of its answers.
type scriptedReplicas struct {
	answers []any // int32 or error
	sets    []string
}

func (s *scriptedReplicas) Replicas(_ context.Context, set string) (int32, error) {
	s.sets = append(s.sets, set)
	a := s.answers[0]
	s.answers = s.answers[1:]
	if err, ok := a.(error); ok {
		return 0, err
	}
	return a.(int32), nil
}

// The share's rules when the API server cannot be read: every name until
// a count is known, then the last count read; each outage logged once.
func TestStatefulSet(t *testing.T) {
	down := errors.New("dial tcp 10.96.0.1:443: connect: connection refused")
	api := &scriptedReplicas{answers: []any{down, down, int32(3), down, down, int32(2), int32(1), int32(0)}}
	var log bytes.Buffer
	failures := 0
	s := shard.NewStatefulSet(shard.Member{Pod: "readsync-1", Set: "readsync", Ordinal: 1},
		api, slog.New(slog.NewTextHandler(&log, nil)), func() { failures++ })
	want := []shard.Share{
		shard.All(), shard.All(), // no count known yet: every name
		{1, 3},         // read
		{1, 3}, {1, 3}, // kept
		{1, 2},         // read again
		{1, 1}, {1, 0}, // scaled below this pod: none
	}
	for i, w := range want {
		if got := s.Current(context.Background()); got != w {
			t.Errorf("pass %d: share %v, want %v", i, got, w)
		}
	}
	if got := (shard.Share{1, 1}).Filter([]string{"a", "b"}); len(got) != 0 {
		t.Errorf("a pod beyond the replicas takes %q", got)
	}
	for _, set := range api.sets {
		if set != "readsync" {
			t.Errorf("read StatefulSet %q, want readsync (the pod's name without its ordinal)", set)
		}
	}
	if failures != 4 {
		t.Errorf("%d failed reads reported, want 4", failures)
	}
	for msg, n := range map[string]int{
		"no count is known yet":        1,
		"keeping the last known count": 1,
		"StatefulSet readable again":   2,
		"shard count changed":          3,
		"connect: connection refused":  2,
	} {
		if got := strings.Count(log.String(), msg); got != n {
			t.Errorf("log has %q %d times, want %d:\n%s", msg, got, n, log.String())
		}
	}
}

// A share says itself one way in the log and another in sync_runs.shard,
// where a process that takes every name records none.
func TestStringAndLabel(t *testing.T) {
	for _, tt := range []struct {
		s          shard.Share
		str, label string
	}{
		{shard.All(), "all", ""},
		{shard.Share{Index: 0, Count: 1}, "all", ""},
		{shard.Share{Index: 1, Count: 3}, "1/3", "1/3"},
		{shard.Share{Index: 3, Count: 3}, "none (3/3)", "3/3"},
	} {
		if got := tt.s.String(); got != tt.str {
			t.Errorf("%#v.String() = %q, want %q", tt.s, got, tt.str)
		}
		if got := tt.s.Label(); got != tt.label {
			t.Errorf("%#v.Label() = %q, want %q", tt.s, got, tt.label)
		}
	}
}
