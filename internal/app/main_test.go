package app

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/sethvargo/go-envconfig"

	"github.com/readsync/readsync/internal/apptest"
)

// testBuild is the build the tests run as: fixed, so that what they read
// of the version (the User-Agent, readsync_build_info) stays the same.
var testBuild = Build{Version: "dev", Commit: "unknown"}

func TestMain(m *testing.M) {
	if os.Getenv(apptest.RunsReadsync) == "1" {
		os.Exit(Main(testBuild))
	}
	os.Exit(m.Run())
}

// run is Run of the tests' build.
func run(ctx context.Context, args []string, lookup envconfig.Lookuper, stdout, stderr io.Writer) int {
	return Run(ctx, testBuild, args, lookup, stdout, stderr)
}
