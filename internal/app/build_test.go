package app

import (
	"runtime/debug"
	"testing"
)

// What a build says of itself, from each source the commit may come from.
// cmd/readsync's TestVersion builds binaries to see the same from the
// toolchain itself.
func TestBuildOf(t *testing.T) {
	checkout := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/readsync/readsync", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	installed := func(version string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/readsync/readsync", Version: version}}
	}
	const rev = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"
	for _, c := range []struct {
		name, release, stamped string
		info                   *debug.BuildInfo
		want                   Build
	}{
		{"go build of a release commit", "0.6.0", "", checkout(rev, "false"), Build{"0.6.0", "1a2b3c4d5e6f"}},
		{"go build between releases", "0.7.0-dev", "", checkout(rev, "false"), Build{"0.7.0-dev-1a2b3c4d5e6f", "1a2b3c4d5e6f"}},
		{"go build of a changed release", "0.6.0", "", checkout(rev, "true"), Build{"0.6.0-1a2b3c4d5e6f-modified", "1a2b3c4d5e6f-modified"}},
		{"make build between releases", "0.7.0-dev", "1a2b3c4d5e6f", checkout(rev, "false"), Build{"0.7.0-dev-1a2b3c4d5e6f", "1a2b3c4d5e6f"}},
		{"make image of a changed tree", "0.7.0-dev", "1a2b3c4d5e6f-modified", nil, Build{"0.7.0-dev-1a2b3c4d5e6f-modified", "1a2b3c4d5e6f-modified"}},
		{"go install of a commit", "0.7.0-dev", "", installed("v0.6.1-0.20261128101500-1a2b3c4d5e6f"), Build{"0.7.0-dev-1a2b3c4d5e6f", "1a2b3c4d5e6f"}},
		{"go install of a commit before any tag", "0.1.0-dev", "", installed("v0.0.0-20261128101500-1a2b3c4d5e6f"), Build{"0.1.0-dev-1a2b3c4d5e6f", "1a2b3c4d5e6f"}},
		{"go install of a release", "0.6.0", "", installed("v0.6.0"), Build{"0.6.0", "unknown"}},
		{"no build info", "0.7.0-dev", "", nil, Build{"0.7.0-dev-unknown", "unknown"}},
	} {
		if got := buildOf(c.release, c.stamped, c.info); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
