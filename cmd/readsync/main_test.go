package main

import (
	"os"
	"testing"
)

// runsReadsync, set to 1 in a process's environment, makes this test binary
// run readsync's main instead of the tests: a test that needs readsync as a
// process of its own (one it signals and restarts, whose process metrics are
// its own) runs it so, with the race detector of the tests.
const runsReadsync = "TEST_BINARY_RUNS_READSYNC"

func TestMain(m *testing.M) {
	if os.Getenv(runsReadsync) == "1" {
		main() // exits
	}
	os.Exit(m.Run())
}
