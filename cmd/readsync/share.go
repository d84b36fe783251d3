package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	gosync "sync"
	"time"

	"github.com/readsync/readsync/sync"
)

// share is the part of the scheduled names one pass takes: shard Index of
// Count. 0 of 1 is every name; an Index at or beyond Count takes none,
// which is what a StatefulSet's pod being scaled away is left with.
type share struct{ Index, Count uint32 }

// everyName is the share of a process that is not sharded.
var everyName = share{Index: 0, Count: 1}

// shareOf is the share of a fixed READSYNC_SHARD.
func shareOf(s sync.Shard) share {
	if s.Count <= 1 {
		return everyName
	}
	return share{Index: s.Index, Count: s.Count}
}

// filter returns the names of the share, in their order.
func (s share) filter(names []string) []string {
	if s.Index >= s.Count {
		return nil
	}
	return sync.Shard{Index: s.Index, Count: s.Count}.Filter(names)
}

// String is "i/n", "all" for every name, or "none (i/n)" for a pod beyond
// its StatefulSet's replicas.
func (s share) String() string {
	switch {
	case s == everyName:
		return "all"
	case s.Index >= s.Count:
		return fmt.Sprintf("none (%d/%d)", s.Index, s.Count)
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// shareSource tells a pass which share of the names it takes. A fixed
// READSYNC_SHARD is a share itself; READSYNC_SHARD=<pod>/statefulset is a
// *statefulSetShare, whose count follows the StatefulSet's replicas.
type shareSource interface {
	// current is the share for a pass starting now. It never fails: when
	// the count cannot be read, the source's documented rule applies.
	current(ctx context.Context) share
	// check reads the share now and reports why it cannot, for the start
	// of the daemon, a backfill and --check.
	check(ctx context.Context) (share, error)
}

func (s share) current(context.Context) share        { return s }
func (s share) check(context.Context) (share, error) { return s, nil }

// statefulSetSuffix ends a READSYNC_SHARD whose n is the StatefulSet's
// replicas, read from the API server before each pass.
const statefulSetSuffix = "/statefulset"

// statefulSetMember is READSYNC_SHARD=<pod>/statefulset parsed: a
// StatefulSet's pods are named <set>-<ordinal>, so the pod's name gives both
// the StatefulSet to read and the pod's shard index.
type statefulSetMember struct {
	Pod     string
	Set     string
	Ordinal uint32
}

// parseStatefulSetMember reads "<pod>/statefulset"; ok is false when v
// does not end in /statefulset.
func parseStatefulSetMember(v string) (m statefulSetMember, ok bool, err error) {
	pod, ok := strings.CutSuffix(v, statefulSetSuffix)
	if !ok {
		return statefulSetMember{}, false, nil
	}
	j := strings.LastIndexByte(pod, '-')
	if j <= 0 {
		return statefulSetMember{}, true, fmt.Errorf("pod name %q: want <statefulset>-<ordinal>", pod)
	}
	ordinal, err := strconv.ParseUint(pod[j+1:], 10, 32)
	if err != nil || strings.ContainsAny(pod, "/ ") {
		return statefulSetMember{}, true, fmt.Errorf("pod name %q: want <statefulset>-<ordinal>", pod)
	}
	return statefulSetMember{Pod: pod, Set: pod[:j], Ordinal: uint32(ordinal)}, true, nil
}

// newShareSource is READSYNC_SHARD's source of shares: the fixed share of
// i/n, or for <pod>/statefulset the pod's StatefulSet read through the API
// server. m receives the share of every pass.
func newShareSource(cfg *config, log *slog.Logger, m *metrics) (shareSource, error) {
	if cfg.Member == nil {
		s := shareOf(cfg.ShardOf)
		m.observeShare(s)
		return s, nil
	}
	api, err := newKubeAPI(cfg.KubernetesHost, cfg.KubernetesPort, cfg.ServiceAccountDir)
	if err != nil {
		return nil, fmt.Errorf("READSYNC_SHARD=%q: %w", cfg.Shard, err)
	}
	return &statefulSetShare{member: *cfg.Member, api: api, log: log, metrics: m}, nil
}

// replicaReader reads a StatefulSet's spec.replicas; *kubeAPI is the real
// one.
type replicaReader interface {
	replicas(ctx context.Context, set string) (int32, error)
}

// statefulSetReadTimeout bounds one read of the count, so that a hanging
// API server costs a pass seconds rather than its whole interval.
const statefulSetReadTimeout = 10 * time.Second

// statefulSetShare is the share of a StatefulSet's pod: its ordinal of the
// StatefulSet's spec.replicas, read again before every pass, so that the
// count follows however the replicas were changed (an overlay, kubectl
// scale, an autoscaler, helm upgrade) without restarting any pod.
//
// When a read fails, the pod keeps the last count it read: the pods of a
// StatefulSet read the same object, so they keep agreeing unless the count
// changed during the outage. Before any count is known it takes every name,
// since a name fetched twice is harmless and a name not fetched is lost.
// Each outage is logged once, when it starts and when it ends.
type statefulSetShare struct {
	member  statefulSetMember
	api     replicaReader
	log     *slog.Logger
	metrics *metrics

	mu        gosync.Mutex // passes of several schedules read at once
	known     int32        // the last count read; valid when haveKnown
	haveKnown bool
	failing   bool
}

// read reads the count now and returns the share it gives; a change from
// the last known count is logged.
func (s *statefulSetShare) read(ctx context.Context) (share, error) {
	ctx, cancel := context.WithTimeout(ctx, statefulSetReadTimeout)
	defer cancel()
	n, err := s.api.replicas(ctx, s.member.Set)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.metrics.shardReadFailures.Inc()
		return share{}, err
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
	return share{Index: s.member.Ordinal, Count: uint32(n)}, nil
}

func (s *statefulSetShare) check(ctx context.Context) (share, error) {
	sh, err := s.read(ctx)
	if err != nil {
		return share{}, fmt.Errorf("READSYNC_SHARD=%q: reading the replicas of StatefulSet %s: %w",
			s.member.Pod+statefulSetSuffix, s.member.Set, err)
	}
	return sh, nil
}

func (s *statefulSetShare) current(ctx context.Context) share {
	sh, err := s.read(ctx)
	if err == nil {
		return sh
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.haveKnown {
		sh = everyName
	} else {
		sh = share{Index: s.member.Ordinal, Count: uint32(s.known)}
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

// permanent reports whether a failed read is one that waiting will not
// mend: the API server refused the token or the request, or has no such
// StatefulSet. At start, that is a configuration error.
func permanent(err error) bool {
	var se *kubeStatusError
	if errors.As(err, &se) {
		return se.Code == 401 || se.Code == 403 || se.Code == 404
	}
	var ce *kubeConfigError
	return errors.As(err, &ce)
}
