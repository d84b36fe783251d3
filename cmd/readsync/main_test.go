package main

import "testing"

// The Makefile's and the Dockerfile's -X flags stamp these variables;
// renaming one would silently leave --version saying "dev".
func TestStampedVariables(t *testing.T) {
	if version == "" || commit == "" {
		t.Errorf("version %q, commit %q: an unstamped build says dev and unknown", version, commit)
	}
}
