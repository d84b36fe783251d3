package shard_test

import (
	"fmt"
	"testing"

	"github.com/readsync/readsync/internal/shard"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want shard.Share
		err  bool
	}{
		{"", shard.All(), false},
		{"0/1", shard.Share{Index: 0, Count: 1}, false},
		{"2/3", shard.Share{Index: 2, Count: 3}, false},
		{" 1 / 4 ", shard.Share{Index: 1, Count: 4}, false},
		{"3/3", shard.Share{}, true},
		{"0/0", shard.Share{}, true},
		{"-1/3", shard.Share{}, true},
		{"1", shard.Share{}, true},
		{"a/b", shard.Share{}, true},
		{"1/2/3", shard.Share{}, true},
		// A StatefulSet pod's name carries its ordinal after the last '-'.
		{"readsync-2/3", shard.Share{Index: 2, Count: 3}, false},
		{"readsync-0/1", shard.Share{Index: 0, Count: 1}, false},
		{"my-readsync-eu-10/12", shard.Share{Index: 10, Count: 12}, false},
		{"readsync-3/3", shard.Share{}, true},
		{"readsync-/3", shard.Share{}, true},
		{"readsync/3", shard.Share{}, true},
		{"readsync-a/3", shard.Share{}, true},
		{"readsync-2", shard.Share{}, true},
		// An unexpanded $(POD_NAME) (a typo in the variable's name) must
		// fail rather than pass as some shard.
		{"$(POD_NAME)/3", shard.Share{}, true},
	}
	for _, tt := range tests {
		got, err := shard.Parse(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, error %t", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// n shards together own every name exactly once, and a name's owner does
// not depend on which other names come with it.
func TestShardsPartitionNames(t *testing.T) {
	var names []string
	for i := range 3000 {
		names = append(names, fmt.Sprintf("name-%d.eth", i))
	}
	names = append(names, "café-☕.eth", "a&b=c+d%e f.eth", "")
	for _, n := range []uint32{1, 2, 3, 7} {
		owners := make(map[string]int)
		for i := range n {
			s := shard.Share{Index: i, Count: n}
			part := s.Filter(names)
			if n > 1 && (len(part) == 0 || len(part) == len(names)) {
				t.Errorf("shard %v owns %d of %d names", s, len(part), len(names))
			}
			for _, name := range part {
				owners[name]++
				if alone := s.Filter([]string{name}); len(alone) != 1 {
					t.Errorf("shard %v owns %q among others but not alone", s, name)
				}
			}
		}
		for _, name := range names {
			if owners[name] != 1 {
				t.Errorf("%d shards: %q owned %d times", n, name, owners[name])
			}
		}
	}
}

// The hash is part of the contract: changing it would move names between
// running replicas, so a few owners are pinned.
func TestShardOwnersAreStable(t *testing.T) {
	for name, owner := range map[string]uint32{"alice.dmail": 0, "bob.eth": 1, "café-☕.eth": 0, "proj-00000.dmail": 2} {
		if !(shard.Share{Index: owner, Count: 3}).Owns(name) {
			t.Errorf("%q is no longer owned by shard %d/3", name, owner)
		}
	}
}
