package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink/schema/migrate"
)

// The tests build readsync as a user would, in a git repository of their
// own holding the module's sources, and read what --version says: at a
// release commit, at the commit after it, with a work tree that differs,
// and built where the toolchain sees no checkout, as in the image.

// sourceRepo copies the files readsync is built from into a new
// directory, the module's root, and makes it a git repository.
func sourceRepo(t *testing.T) string {
	t.Helper()
	goTool(t)
	out, err := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	modRoot := strings.TrimSpace(string(root))
	dst := t.TempDir()
	copyFile := func(rel string) {
		b, err := os.ReadFile(filepath.Join(modRoot, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("go.mod")
	copyFile("go.sum")
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		rel, err := filepath.Rel(modRoot, fields[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fields[1:] {
			copyFile(filepath.Join(rel, f))
		}
	}
	git(t, dst, "init", "-q")
	return dst
}

func goTool(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go on PATH: %v", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git on PATH: %v", err)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=readsync", "-c", "user.email=readsync@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commitVersion writes VERSION and commits the tree, returning the
// commit's first 12 digits.
func commitVersion(t *testing.T, dir, version, message string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte(version+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", message)
	return git(t, dir, "rev-parse", "--short=12", "HEAD")
}

// buildVersion builds ./cmd/readsync in dir with go build and the
// arguments given, and returns what --version prints.
func buildVersion(t *testing.T, dir string, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "readsync")
	cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, args...), "./cmd/readsync")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("readsync --version: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds readsync three times")
	}
	dir := sourceRepo(t)
	tail := regexp.QuoteMeta(", schema migration " + strconv.FormatUint(uint64(migrate.Last()), 10) + ", " + runtime.Version() + ")")

	release := commitVersion(t, dir, "0.6.0", "Release 0.6.0")
	git(t, dir, "tag", "v0.6.0")
	check := func(what, got, want string) {
		t.Helper()
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("%s: --version printed\n  %s\nwant\n  %s", what, got, want)
		}
	}
	check("go build of the release commit", buildVersion(t, dir),
		`^readsync 0\.6\.0 \(commit `+release+tail+`$`)

	next := commitVersion(t, dir, "0.7.0-dev", "Start 0.7.0")
	check("go build of the commit after the release", buildVersion(t, dir),
		`^readsync 0\.7\.0-dev-`+next+` \(commit `+next+tail+`$`)

	// A change not committed: the build is neither the commit nor, at a
	// release commit, the release.
	git(t, dir, "checkout", "-q", "v0.6.0")
	if err := os.WriteFile(filepath.Join(dir, "cmd", "readsync", "extra.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("go build of the release commit with a change", buildVersion(t, dir),
		`^readsync 0\.6\.0-`+release+`-modified \(commit `+release+`-modified`+tail+`$`)

	// Where the toolchain sees no checkout, as in the image's build, the
	// commit is what make stamps.
	if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "cmd", "readsync", "extra.go")); err != nil {
		t.Fatal(err)
	}
	check("build without a checkout, stamped as make image does", buildVersion(t, dir, "-ldflags", "-X main.commit="+release),
		`^readsync 0\.6\.0 \(commit `+release+tail+`$`)
	check("build without a checkout or a stamp", buildVersion(t, dir),
		`^readsync 0\.6\.0 \(commit unknown`+tail+`$`)
}

// The linker drops the methods nothing calls, unless the binary can call
// a method by a name known only when it runs (reflect's MethodByName, as
// text/template and html/template do): then it keeps every exported
// method of every type it links. That made the binary a third larger and
// its resident memory a few MiB larger for the sake of the status page,
// which is why the page is written without a template. The linker marks
// a function that can do so ReflectMethod in its dependency dump.
func TestNoMethodCalledByReflection(t *testing.T) {
	goTool(t)
	out, err := exec.Command("go", "build", "-ldflags=-dumpdep", "-o", os.DevNull, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -ldflags=-dumpdep: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "<ReflectMethod>") {
			t.Fatalf("the binary can call methods by reflection, which keeps every exported method in it:\n%s", line)
		}
	}
}
