package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

func TestParseStatefulSetMember(t *testing.T) {
	for _, tt := range []struct {
		in     string
		want   statefulSetMember
		ok     bool
		hasErr bool
	}{
		{"readsync-2/statefulset", statefulSetMember{Pod: "readsync-2", Set: "readsync", Ordinal: 2}, true, false},
		{"prod-readsync-10/statefulset", statefulSetMember{Pod: "prod-readsync-10", Set: "prod-readsync", Ordinal: 10}, true, false},
		{"2/3", statefulSetMember{}, false, false},
		{"readsync-2/3", statefulSetMember{}, false, false},
		{"readsync/statefulset", statefulSetMember{}, true, true},
		{"-2/statefulset", statefulSetMember{}, true, true},
		{"readsync-x/statefulset", statefulSetMember{}, true, true},
		{"$(POD_NAME)/statefulset", statefulSetMember{}, true, true},
	} {
		got, ok, err := parseStatefulSetMember(tt.in)
		if got != tt.want || ok != tt.ok || (err != nil) != tt.hasErr {
			t.Errorf("parseStatefulSetMember(%q) = %+v, %t, %v; want %+v, %t, error %t", tt.in, got, ok, err, tt.want, tt.ok, tt.hasErr)
		}
	}
}

func TestShareFilter(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	if got := everyName.filter(names); len(got) != len(names) {
		t.Errorf("every name: %q", got)
	}
	for _, none := range []share{{Index: 3, Count: 3}, {Index: 0, Count: 0}} {
		if got := none.filter(names); len(got) != 0 {
			t.Errorf("share %v: %q, want none", none, got)
		}
	}
	seen := map[string]int{}
	for i := range uint32(3) {
		for _, n := range (share{Index: i, Count: 3}).filter(names) {
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

func (s *scriptedReplicas) replicas(_ context.Context, set string) (int32, error) {
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
func TestStatefulSetShare(t *testing.T) {
	down := errors.New("dial tcp 10.96.0.1:443: connect: connection refused")
	api := &scriptedReplicas{answers: []any{down, down, int32(3), down, down, int32(2), int32(1), int32(0)}}
	var log bytes.Buffer
	m := newMetrics()
	s := &statefulSetShare{
		member: statefulSetMember{Pod: "readsync-1", Set: "readsync", Ordinal: 1},
		api:    api, log: slog.New(slog.NewTextHandler(&log, nil)), metrics: m,
	}
	want := []share{
		everyName, everyName, // no count known yet: every name
		{1, 3},         // read
		{1, 3}, {1, 3}, // kept
		{1, 2},         // read again
		{1, 1}, {1, 0}, // scaled below this pod: none
	}
	for i, w := range want {
		if got := s.current(context.Background()); got != w {
			t.Errorf("pass %d: share %v, want %v", i, got, w)
		}
	}
	if got := (share{1, 1}).filter([]string{"a", "b"}); len(got) != 0 {
		t.Errorf("a pod beyond the replicas takes %q", got)
	}
	for _, set := range api.sets {
		if set != "readsync" {
			t.Errorf("read StatefulSet %q, want readsync (the pod's name without its ordinal)", set)
		}
	}
	var c dto.Metric
	if err := m.shardReadFailures.Write(&c); err != nil {
		t.Fatal(err)
	}
	if n := c.GetCounter().GetValue(); n != 4 {
		t.Errorf("readsync_shard_count_read_failures_total %v, want 4", n)
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
