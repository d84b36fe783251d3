package sync

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Shard selects the part of the names one replica handles, so that n
// replicas together cover every name exactly once. The zero Shard owns
// every name.
type Shard struct {
	Index, Count uint32
}

// ParseShard reads "i/n" with 0 <= i < n, where i may also be a name
// ending in "-i", such as the pod name "readsync-2" of a StatefulSet's
// third pod: "readsync-2/3" is shard 2 of 3. That lets a pod spec set
// READSYNC_SHARD to "$(POD_NAME)/n" and every pod find its own index.
// The empty string is the zero Shard.
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{}, nil
	}
	is, ns, ok := strings.Cut(s, "/")
	is = strings.TrimSpace(is)
	if j := strings.LastIndexByte(is, '-'); j > 0 {
		is = is[j+1:] // a pod name: its ordinal is the part after the last '-'
	}
	i, ierr := strconv.ParseUint(is, 10, 32)
	n, nerr := strconv.ParseUint(strings.TrimSpace(ns), 10, 32)
	if !ok || ierr != nil || nerr != nil {
		return Shard{}, fmt.Errorf("shard %q: want i/n, or a pod name ending in -i followed by /n "+
			"(e.g. 0/3 or readsync-0/3)", s)
	}
	if n == 0 || i >= n {
		return Shard{}, fmt.Errorf("shard %q: want 0 <= i < n (e.g. 2/3 for the last of three)", s)
	}
	return Shard{Index: uint32(i), Count: uint32(n)}, nil
}

// Owns reports whether the name belongs to this shard: its FNV-1a hash
// modulo Count is Index. The hash is of the name's bytes, so it is stable
// across processes, versions and machines.
func (s Shard) Owns(name string) bool {
	if s.Count <= 1 {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return uint32(h.Sum64()%uint64(s.Count)) == s.Index
}

// Filter returns the names this shard owns, in their order.
func (s Shard) Filter(names []string) []string {
	if s.Count <= 1 {
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

// String is "i/n", or "all" for the zero Shard.
func (s Shard) String() string {
	if s.Count <= 1 {
		return "all"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}
