package app

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/sethvargo/go-envconfig"
)

// runsReadsync, set to 1 in a process's environment, makes this test binary
// run readsync's Main instead of the tests: a test that needs readsync as a
// process of its own (one it signals and restarts, whose process metrics are
// its own) runs it so, with the race detector of the tests.
const runsReadsync = "TEST_BINARY_RUNS_READSYNC"

// testBuild is the build the tests run: an unstamped one, as go build makes.
var testBuild = Build{Version: "dev", Commit: "unknown"}

func TestMain(m *testing.M) {
	if os.Getenv(runsReadsync) == "1" {
		os.Exit(Main(testBuild))
	}
	os.Exit(m.Run())
}

// run is Run of the tests' build.
func run(ctx context.Context, args []string, lookup envconfig.Lookuper, stdout, stderr io.Writer) int {
	return Run(ctx, testBuild, args, lookup, stdout, stderr)
}
