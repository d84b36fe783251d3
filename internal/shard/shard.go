// Package shard says which of the scheduled names a pass takes when
// several processes share them (READSYNC_SHARD): a fixed share i/n, or the
// ordinal of a StatefulSet's pod among the StatefulSet's replicas, read
// from the API server before every pass.
package shard

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	gosync "sync"
	"time"
)

// Share is the part of the scheduled names one pass takes: shard Index of
// Count. 0 of 1 is every name (All); an Index at or beyond Count takes
// none, which is what a StatefulSet's pod being scaled away is left with.
type Share struct{ Index, Count uint32 }

// All is the share of a process that is not sharded: every name.
func All() Share { return Share{Index: 0, Count: 1} }

// Parse reads a fixed READSYNC_SHARD, "i/n" with 0 <= i < n, where i may
// also be a name ending in "-i", such as the pod name "readsync-2" of a
// StatefulSet's third pod: "readsync-2/3" is share 2 of 3. That lets a pod
// spec set READSYNC_SHARD to "$(POD_NAME)/n" and every pod find its own
// index. The empty string is All.
func Parse(s string) (Share, error) {
	if s == "" {
		return All(), nil
	}
	is, ns, ok := strings.Cut(s, "/")
	is = strings.TrimSpace(is)
	if j := strings.LastIndexByte(is, '-'); j > 0 {
		is = is[j+1:] // a pod name: its ordinal is the part after the last '-'
	}
	i, ierr := strconv.ParseUint(is, 10, 32)
	n, nerr := strconv.ParseUint(strings.TrimSpace(ns), 10, 32)
	if !ok || ierr != nil || nerr != nil {
		return Share{}, fmt.Errorf("shard %q: want i/n, or a pod name ending in -i followed by /n "+
			"(e.g. 0/3 or readsync-0/3)", s)
	}
	if n == 0 || i >= n {
		return Share{}, fmt.Errorf("shard %q: want 0 <= i < n (e.g. 2/3 for the last of three)", s)
	}
	return Share{Index: uint32(i), Count: uint32(n)}, nil
}

// Owns reports whether the name belongs to the share: its FNV-1a hash
// modulo Count is Index. The hash is of the name's bytes, so it is stable
// across processes, versions and machines.
func (s Share) Owns(name string) bool {
	switch {
	case s.Index >= s.Count:
		return false
	case s.Count == 1:
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return uint32(h.Sum64()%uint64(s.Count)) == s.Index
}

// Filter returns the names of the share, in their order.
func (s Share) Filter(names []string) []string {
	switch {
	case s.Index >= s.Count:
		return nil
	case s.Count == 1:
		return names
	}
	out := make([]string, 0, len(names)/int(s.Count)+1)
	for _, n := range names {
		if s.Owns(n) {
			out = append(out, n)
		}
	}
	return out
}

// String is "i/n", "all" for every name, or "none (i/n)" for a pod beyond
// its StatefulSet's replicas.
func (s Share) String() string {
	switch {
	case s == All():
		return "all"
	case s.Index >= s.Count:
		return fmt.Sprintf("none (%d/%d)", s.Index, s.Count)
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Label is how sync_runs.shard records a share: "i/n", or empty for a
// process that takes every name.
func (s Share) Label() string {
	if s == All() {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Source tells a pass which share of the names it takes. A fixed
// READSYNC_SHARD is a Share itself; READSYNC_SHARD=<pod>/statefulset is a
// *StatefulSet, whose count follows the StatefulSet's replicas.
type Source interface {
	// Current is the share for a pass starting now. It never fails: when
	// the count cannot be read, the source's documented rule applies.
	Current(ctx context.Context) Share
	// Check reads the share now and reports why it cannot, for the start
	// of the daemon, a backfill and --check.
	Check(ctx context.Context) (Share, error)
}

// Current is s: a fixed share never changes.
func (s Share) Current(context.Context) Share { return s }

// Check is s: a fixed share cannot fail to be read.
func (s Share) Check(context.Context) (Share, error) { return s, nil }

// StatefulSetSuffix ends a READSYNC_SHARD whose n is the StatefulSet's
// replicas, read from the API server before each pass.
const StatefulSetSuffix = "/statefulset"

// Member is READSYNC_SHARD=<pod>/statefulset parsed: a StatefulSet's pods
// are named <set>-<ordinal>, so the pod's name gives both the StatefulSet
// to read and the pod's shard index.
type Member struct {
	Pod     string
	Set     string
	Ordinal uint32
}

// ParseMember reads "<pod>/statefulset"; ok is false when v does not end
// in /statefulset.
func ParseMember(v string) (m Member, ok bool, err error) {
	pod, ok := strings.CutSuffix(v, StatefulSetSuffix)
	if !ok {
		return Member{}, false, nil
	}
	j := strings.LastIndexByte(pod, '-')
	if j <= 0 {
		return Member{}, true, fmt.Errorf("pod name %q: want <statefulset>-<ordinal>", pod)
	}
	ordinal, err := strconv.ParseUint(pod[j+1:], 10, 32)
	if err != nil || strings.ContainsAny(pod, "/ ") {
		return Member{}, true, fmt.Errorf("pod name %q: want <statefulset>-<ordinal>", pod)
	}
	return Member{Pod: pod, Set: pod[:j], Ordinal: uint32(ordinal)}, true, nil
}

// ReplicaReader reads a StatefulSet's spec.replicas; *kubeapi.Client is
// the real one.
type ReplicaReader interface {
	Replicas(ctx context.Context, set string) (int32, error)
}

// readTimeout bounds one read of the count, so that a hanging API server
// costs a pass seconds rather than its whole interval.
const readTimeout = 10 * time.Second

// StatefulSet is the share of a StatefulSet's pod: its ordinal of the
// StatefulSet's spec.replicas, read again before every pass, so that the
// count follows however the replicas were changed (an overlay, kubectl
// scale, an autoscaler, helm upgrade) without restarting any pod.
//
// When a read fails, the pod keeps the last count it read: the pods of a
// StatefulSet read the same object, so they keep agreeing unless the count
// changed during the outage. Before any count is known it takes every name,
// since a name fetched twice is harmless and a name not fetched is lost.
// Each outage is logged once, when it starts and when it ends.
//
// Its methods may be called by passes of several schedules at once.
type StatefulSet struct {
	member     Member
	api        ReplicaReader
	log        *slog.Logger
	readFailed func()

	mu        gosync.Mutex
	known     int32 // the last count read; valid when haveKnown
	haveKnown bool
	failing   bool
}

// NewStatefulSet is the share of member, whose count api reads; log
// receives the changes of count and the outages, and readFailed (which
// may be nil) is called at every failed read.
func NewStatefulSet(member Member, api ReplicaReader, log *slog.Logger, readFailed func()) *StatefulSet {
	if readFailed == nil {
		readFailed = func() {}
	}
	return &StatefulSet{member: member, api: api, log: log, readFailed: readFailed}
}

// read reads the count now and returns the share it gives; a change from
// the last known count is logged.
func (s *StatefulSet) read(ctx context.Context) (Share, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	n, err := s.api.Replicas(ctx, s.member.Set)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.readFailed()
		return Share{}, err
	}
	if s.haveKnown && n != s.known {
		s.log.Info("shard count changed: the StatefulSet's replicas changed",
			"statefulset", s.member.Set, "from", s.known, "to", n, "ordinal", s.member.Ordinal)
	}
	s.known, s.haveKnown = n, true
	if s.failing {
		s.failing = false
		s.log.Info("StatefulSet readable again", "statefulset", s.member.Set, "replicas", n)
	}
	return Share{Index: s.member.Ordinal, Count: uint32(n)}, nil
}

// Check reads the count now, and says which StatefulSet it could not read.
func (s *StatefulSet) Check(ctx context.Context) (Share, error) {
	sh, err := s.read(ctx)
	if err != nil {
		return Share{}, fmt.Errorf("READSYNC_SHARD=%q: reading the replicas of StatefulSet %s: %w",
			s.member.Pod+StatefulSetSuffix, s.member.Set, err)
	}
	return sh, nil
}

// Current reads the count now; when it cannot, it keeps the last count
// read, or takes every name while none is known.
func (s *StatefulSet) Current(ctx context.Context) Share {
	sh, err := s.read(ctx)
	if err == nil {
		return sh
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.haveKnown {
		sh = All()
	} else {
		sh = Share{Index: s.member.Ordinal, Count: uint32(s.known)}
	}
	if !s.failing {
		s.failing = true
		msg := "cannot read the StatefulSet's replicas; keeping the last known count until it can"
		if !s.haveKnown {
			msg = "cannot read the StatefulSet's replicas, and no count is known yet; taking every name until it can"
		}
		s.log.Warn(msg, "statefulset", s.member.Set, "shard", sh.String(), "err", err)
	}
	return sh
}
