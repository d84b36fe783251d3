package docs_test

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readsync/readsync/internal/app"
	"github.com/readsync/readsync/internal/config"
	"github.com/readsync/readsync/internal/metrics"
	"github.com/readsync/readsync/sink/spool"
)

// The documentation a user reads is held to the code: each reference table
// that mirrors the code lists exactly what the code has, and every link
// between the documents leads somewhere.

const (
	configurationDoc = "configuration.md"
	operationsDoc    = "operations.md"
	// appSource declares readsync's exit codes.
	appSource = "../internal/app/app.go"
)

// readDoc returns a document of the repository.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the part of doc under the heading title, up to the next
// heading of the same or a higher level.
func section(t *testing.T, doc, path, title string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+title+"\n")
	if i < 0 {
		t.Fatalf("%s has no heading %q", path, title)
	}
	level := title[:strings.Index(title, " ")+1]
	rest := doc[i+len(title)+2:]
	for _, h := range regexp.MustCompile(`(?m)^#+ `).FindAllStringIndex(rest, -1) {
		if l := rest[h[0]:h[1]]; len(l) <= len(level) {
			return rest[:h[0]]
		}
	}
	return rest
}

// compareSets reports what is documented and not in the code, and the
// reverse.
func compareSets(t *testing.T, what, path string, documented, inCode []string) {
	t.Helper()
	for _, n := range inCode {
		if !slices.Contains(documented, n) {
			t.Errorf("%s: the table of %s lacks %s", path, what, n)
		}
	}
	for _, n := range documented {
		if !slices.Contains(inCode, n) {
			t.Errorf("%s documents %s %s, which readsync does not have", path, what, n)
		}
	}
}

// The command line's table names every flag parseFlags defines, and no
// other.
func TestReferenceListsEveryFlag(t *testing.T) {
	doc := section(t, readDoc(t, configurationDoc), configurationDoc, "## Command line")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `readsync([^`]*)`").FindAllStringSubmatch(doc, -1) {
		for _, f := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(m[1], -1) {
			if !slices.Contains(documented, f[1]) {
				documented = append(documented, f[1])
			}
		}
	}
	// The flag package answers -help (and -h) itself.
	defined := append([]string{"help"}, app.FlagNames()...)
	compareSets(t, "flags", configurationDoc, documented, defined)
}

// The configuration reference's table of variables is the user's
// contract: it lists the variables readsync reads, with the same
// defaults.
func TestReferenceListsEveryVariable(t *testing.T) {
	b := readDoc(t, configurationDoc)
	row := regexp.MustCompile("(?m)^\\| `((?:READSYNC|KUBERNETES)_[A-Z0-9_]+)` \\|.*\\| ([^|]+) \\|$")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(b, -1) {
		documented[m[1]] = strings.TrimSpace(m[2])
	}
	for _, v := range config.Variables() {
		def, ok := documented[v.Name]
		switch {
		case !ok:
			t.Errorf("%s: the table of variables lacks %s", configurationDoc, v.Name)
		case v.Required && def != "required":
			t.Errorf("%s: %s default %q, want required", configurationDoc, v.Name, def)
		case v.Default != "" && def != "`"+v.Default+"`":
			t.Errorf("%s: %s default %q, want `%s`", configurationDoc, v.Name, def, v.Default)
		}
		delete(documented, v.Name)
	}
	for name := range documented {
		t.Errorf("%s documents %s, which readsync does not read", configurationDoc, name)
	}
}

// The table of exit codes lists exactly the exit codes app.go declares.
func TestReferenceListsEveryExitCode(t *testing.T) {
	doc := section(t, readDoc(t, configurationDoc), configurationDoc, "## Exit codes")
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllStringSubmatch(doc, -1) {
		documented = append(documented, m[1])
	}
	file, err := parser.ParseFile(token.NewFileSet(), appSource, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	ast.Inspect(file, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if strings.HasPrefix(name.Name, "Exit") && i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
					v := constant.MakeFromLiteral(lit.Value, lit.Kind, 0)
					declared = append(declared, v.ExactString())
				}
			}
		}
		return true
	})
	if len(declared) == 0 {
		t.Fatal(appSource + " declares no exit codes: the test reads the wrong file")
	}
	compareSets(t, "exit codes", configurationDoc, documented, declared)
}

// The table of metrics names every series readsync registers, and no
// other: the daemon's registry, with the spool's series.
func TestReferenceListsEveryMetric(t *testing.T) {
	doc := section(t, readDoc(t, operationsDoc), operationsDoc, "## Monitoring")
	var documented []string
	for _, row := range regexp.MustCompile("(?m)^\\| (`readsync_[^|]*)\\|").FindAllStringSubmatch(doc, -1) {
		for _, m := range regexp.MustCompile("`(readsync_[a-z_]+)`").FindAllStringSubmatch(row[1], -1) {
			documented = append(documented, m[1])
		}
	}
	m := metrics.New("dev", "unknown") // a build as the tests name it
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool"), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	m.ObserveSpool(sp)
	var registered []string
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range m.Collectors() {
		descs := make(chan *prometheus.Desc)
		go func() {
			c.Describe(descs)
			close(descs)
		}()
		for d := range descs {
			name := fqName.FindStringSubmatch(d.String())
			if name == nil {
				t.Fatalf("no name in %s", d)
			}
			if strings.HasPrefix(name[1], "readsync_") && !slices.Contains(registered, name[1]) {
				registered = append(registered, name[1])
			}
		}
	}
	compareSets(t, "metrics", operationsDoc, documented, registered)
}

// Every link between the documents leads to a file that exists and, when
// it names one, to a heading of it.
func TestDocumentLinks(t *testing.T) {
	docs := []string{"../README.md", "../CONTRIBUTING.md", "../CHANGELOG.md", "../BENCHMARKS.md",
		"../deployments/helm/readsync/README.md"}
	more, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, more...)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, d := range docs {
		text := readDoc(t, d)
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := d
			if file != "" {
				path = filepath.Join(filepath.Dir(d), file)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s links to %s, which does not exist", d, target)
				continue
			}
			if anchor == "" || info.IsDir() {
				continue
			}
			if !slices.Contains(anchors(readDoc(t, path)), anchor) {
				t.Errorf("%s links to %s, but %s has no heading #%s", d, target, path, anchor)
			}
		}
	}
}

// anchors returns the anchors GitHub gives a document's headings: lower
// case, punctuation dropped, spaces as hyphens, repeats numbered.
func anchors(doc string) []string {
	var out []string
	seen := map[string]int{}
	inCode := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		n := seen[a]
		seen[a]++
		if n > 0 {
			a += "-" + strconv.Itoa(n)
		}
		out = append(out, a)
	}
	return out
}

// The image tags kubernetes.md's examples deploy name the latest release,
// the newest version the changelog has a section of: a user who copies
// them runs what was released last, not an older release.
func TestKubernetesExamplesDeployTheLatestRelease(t *testing.T) {
	changelog := readDoc(t, "../CHANGELOG.md")
	release := regexp.MustCompile(`(?m)^## (\d+\.\d+\.\d+)$`).FindStringSubmatch(changelog)
	if release == nil {
		t.Fatal("CHANGELOG.md has no section of a release (## x.y.z)")
	}
	doc := readDoc(t, "kubernetes.md")
	tags := regexp.MustCompile(`(?:newTag: |image\.tag=)(\S+)`).FindAllStringSubmatch(doc, -1)
	if len(tags) < 3 {
		t.Fatalf("kubernetes.md names %d image tags of a release; the parse missed them", len(tags))
	}
	for _, m := range tags {
		if m[1] != release[1] {
			t.Errorf("kubernetes.md deploys the tag %s in an example (%q), not the latest release, %s", m[1], m[0], release[1])
		}
	}
}
