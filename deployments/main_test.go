package deployments_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/readsync/readsync/internal/app"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/internal/config"
)

// testBuild is the build the tests run as: fixed, so that what they read
// of the version stays the same.
var testBuild = app.Build{Version: "dev", Commit: "unknown"}

func TestMain(m *testing.M) {
	if os.Getenv(apptest.RunsReadsync) == "1" {
		os.Exit(app.Main(testBuild))
	}
	os.Exit(m.Run())
}

// run runs readsync in this process, as a pod of the deployments would run
// it, with the environment env and nothing else.
func run(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	return app.Run(ctx, testBuild, args, config.Environ(env), stdout, stderr)
}

// runIn runs readsync in this process with the fixture's environment, and
// fails the test if its output shows a secret.
func runIn(t *testing.T, f *apptest.Fixture, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = run(context.Background(), args, f.Env, &out, &errs)
	f.NoSecrets(t, out.String()+errs.String())
	return code, out.String(), errs.String()
}
