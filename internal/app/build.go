package app

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/readsync/readsync"
	"github.com/readsync/readsync/sink/schema/migrate"
)

// Build says which build is running: --version prints it, the
// readsync_build_info metric carries it, and the upstream and the API
// server see Version in the User-Agent.
type Build struct {
	// Version names the build as its image is tagged: the release, such
	// as 0.6.0, for a build of a release commit as it was committed; at
	// any other commit the VERSION file's next release with -dev, then the
	// commit, such as 0.7.0-dev-1a2b3c4d5e6f, and -modified when the work
	// tree differed from the commit.
	Version string
	// Commit is the commit built, its first 12 hex digits with -modified
	// when the work tree differed from it, or "unknown".
	Commit string
}

// commitDigits is how much of a commit's hash a build shows: as many as a
// Go pseudo-version holds, and as `make` stamps.
const commitDigits = 12

// modifiedSuffix marks a commit whose work tree had changes when built.
const modifiedSuffix = "-modified"

// CurrentBuild is the running binary's build: the VERSION file it embeds,
// and the commit stamped with -ldflags "-X main.commit=…" (make build,
// make image) or, when none is, the commit the Go toolchain recorded (go
// build in a checkout: vcs.revision and vcs.modified; go install of a
// commit: its pseudo-version).
func CurrentBuild(stampedCommit string) Build {
	info, _ := debug.ReadBuildInfo()
	return buildOf(readsync.Version(), stampedCommit, info)
}

// pseudoVersionRev is the commit at the end of a Go pseudo-version, such as
// v0.6.1-0.20261128101500-1a2b3c4d5e6f.
var pseudoVersionRev = regexp.MustCompile(`[.-]\d{14}-([0-9a-f]{12})(\+incompatible)?$`)

// buildOf is the build of release (the VERSION file) and the commit
// stamped or, when stamped is empty, recorded in info (nil when the
// binary has none).
func buildOf(release, stamped string, info *debug.BuildInfo) Build {
	commit := stamped
	if commit == "" && info != nil {
		commit = commitOf(info)
	}
	if commit == "" {
		commit = "unknown"
	}
	b := Build{Version: release, Commit: commit}
	if strings.Contains(release, "-") || strings.HasSuffix(commit, modifiedSuffix) {
		// Not the release as committed: the image of the same source is
		// tagged with the commit too, so say it here as well.
		b.Version = release + "-" + commit
	}
	return b
}

// commitOf reads the commit a Go toolchain recorded in info: the
// checkout's for go build, the pseudo-version's for go install of a
// commit; "" when neither (go install of a tagged release, whose
// VERSION file says which it is).
func commitOf(info *debug.BuildInfo) string {
	var rev string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		if m := pseudoVersionRev.FindStringSubmatch(info.Main.Version); m != nil {
			rev = m[1]
		}
	}
	if rev == "" {
		return ""
	}
	rev = rev[:min(len(rev), commitDigits)]
	if modified {
		rev += modifiedSuffix
	}
	return rev
}

// String is the line --version prints: the build, its commit, the number
// of the last migration of the schema it creates, and the Go it was
// built with.
func (b Build) String() string {
	return fmt.Sprintf("readsync %s (commit %s, schema migration %d, %s)", b.Version, b.Commit, migrate.Last(), runtime.Version())
}
