package deployments_test

import (
	"net"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/readsync/readsync/internal/config"
)

// No Docker engine runs the tests, so the Dockerfile is held to the
// repository by reading it: the Go of go.mod, the -ldflags of the
// Makefile, the port of READSYNC_HTTP_ADDR's default.

// readRepoFile returns a file of the repository, by its path from the root.
func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDockerfileGoVersion(t *testing.T) {
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(readRepoFile(t, "go.mod"))
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	from := regexp.MustCompile(`(?m)^FROM golang:(\S+) AS build$`).FindStringSubmatch(readRepoFile(t, "Dockerfile"))
	if from == nil {
		t.Fatal("Dockerfile: no `FROM golang:<version> AS build` stage")
	}
	if from[1] != goVersion[1] && !strings.HasPrefix(from[1], goVersion[1]+"-") {
		t.Errorf("Dockerfile builds with golang:%s, go.mod says go %s", from[1], goVersion[1])
	}
}

func TestDockerfileBuildMatchesMakefile(t *testing.T) {
	ldflags := regexp.MustCompile(`(?m)^LDFLAGS\s*:=\s*(.+)$`).FindStringSubmatch(readRepoFile(t, "Makefile"))
	if ldflags == nil {
		t.Fatal("Makefile: no LDFLAGS")
	}
	// $(VERSION) in make is ${VERSION} in a Dockerfile.
	want := regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllString(strings.TrimSpace(ldflags[1]), "$${$1}")
	df := readRepoFile(t, "Dockerfile")
	if !strings.Contains(df, `-ldflags "`+want+`"`) {
		t.Errorf("Dockerfile does not build with the Makefile's -ldflags %q", want)
	}
	// The version is the VERSION file the binary embeds, which the build
	// context holds; the commit comes from make.
	for _, s := range []string{"CGO_ENABLED=0", "ARG COMMIT", "./cmd/readsync"} {
		if !strings.Contains(df, s) {
			t.Errorf("Dockerfile lacks %s", s)
		}
	}
	if strings.Contains(df, "ARG VERSION") {
		t.Error("Dockerfile takes a VERSION: the binary embeds the VERSION file, and a second source could contradict it")
	}
	for _, ignored := range strings.Fields(readRepoFile(t, ".dockerignore")) {
		if ignored == "VERSION" || ignored == "*" {
			t.Errorf(".dockerignore leaves out %s: the build embeds the VERSION file", ignored)
		}
	}
	// cmd/readsync's TestVersion builds with the stamp.
}

func TestDockerfileRuntime(t *testing.T) {
	df := readRepoFile(t, "Dockerfile")
	var def string
	for _, v := range config.Variables() {
		if v.Name == "READSYNC_HTTP_ADDR" {
			def = v.Default
		}
	}
	_, port, err := net.SplitHostPort(def)
	if err != nil {
		t.Fatalf("READSYNC_HTTP_ADDR default %q: %v", def, err)
	}
	if !regexp.MustCompile(`(?m)^EXPOSE ` + port + `$`).MatchString(df) {
		t.Errorf("Dockerfile does not EXPOSE %s, the port of READSYNC_HTTP_ADDR's default %s", port, def)
	}
	user := regexp.MustCompile(`(?m)^USER (\d+)(:\d+)?$`).FindStringSubmatch(df)
	if user == nil || user[1] == "0" {
		t.Errorf("Dockerfile: want a numeric, non-root USER (Kubernetes verifies runAsNonRoot only for numeric users)")
	}
	if !regexp.MustCompile(`(?m)^ENTRYPOINT \["/usr/local/bin/readsync"\]$`).MatchString(df) {
		t.Errorf("Dockerfile: want ENTRYPOINT [\"/usr/local/bin/readsync\"], so that Kubernetes args are readsync's flags")
	}
}
