// Package readsync is the release this source tree builds, read from the
// VERSION file: a release, such as 0.6.0, at the commit that makes it, and
// the next release followed by -dev, such as 0.7.0-dev, at every other
// commit (CONTRIBUTING.md, "Releases"). The binary embeds the file, so a
// build says which it is however it was built: make, docker build, go
// build or go install.
package readsync

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version returns the VERSION file's version.
func Version() string { return strings.TrimSpace(versionFile) }
