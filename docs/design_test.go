package docs_test

import (
	"bufio"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// design.md states facts about the code that a reader acts on: which
// package imports which, which packages are large and why, where a file
// is. Each is held to the code here, so that none is kept by hand.

const (
	designDoc = "design.md"
	module    = "github.com/readsync/readsync/"
)

// marked returns the lines of doc between <!-- name --> and <!-- /name -->.
func marked(t *testing.T, doc, name string) []string {
	t.Helper()
	start, end := "<!-- "+name+" -->\n", "<!-- /"+name+" -->"
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no block %s … %s", designDoc, start, end)
	}
	return strings.Split(strings.TrimSpace(doc[i+len(start):j]), "\n")
}

// sinkImports returns the packages of the sink that the Go files (tests
// left out) of the package in dir import.
func sinkImports(t *testing.T, pkg string) []string {
	t.Helper()
	p, err := build.ImportDir(filepath.Join("..", pkg), 0)
	if err != nil {
		t.Fatalf("package %s: %v", pkg, err)
	}
	var out []string
	for _, imp := range p.Imports {
		if rel, ok := strings.CutPrefix(imp, module); ok && (rel == "sink" || strings.HasPrefix(rel, "sink/")) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

func TestDesignImportGraph(t *testing.T) {
	doc := readDoc(t, designDoc)
	line := regexp.MustCompile("^- `([^`]+)`: (.*)$")
	listed := map[string]bool{}
	for _, l := range marked(t, doc, "imports") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("%s: import line %q is not \"- `package`: `import`, …\"", designDoc, l)
		}
		var want []string
		for _, f := range strings.Split(m[2], ", ") {
			want = append(want, strings.Trim(f, "`"))
		}
		slices.Sort(want)
		listed[m[1]] = true
		if got := sinkImports(t, m[1]); !slices.Equal(got, want) {
			t.Errorf("%s says %s imports %v; it imports %v", designDoc, m[1], want, got)
		}
	}
	// Every package of the sink that readsync is built from has its line.
	err := filepath.WalkDir("../sink", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		pkg := strings.TrimPrefix(filepath.ToSlash(path), "../")
		if d.Name() == "testdata" || strings.Contains(pkg, "sinktest") {
			return filepath.SkipDir
		}
		if p, err := build.ImportDir(path, 0); err == nil && len(p.GoFiles) > 0 && pkg != "sink" && !listed[pkg] {
			t.Errorf("%s lists no imports of %s", designDoc, pkg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// largeLimit is the size, in lines of Go with comments, past which a
// package of the daemon needs a reason in design.md: "about 2 000".
const largeLimit = 2200

func TestDesignNamesLargePackages(t *testing.T) {
	doc := readDoc(t, designDoc)
	reasons := map[string]bool{}
	for _, l := range marked(t, doc, "large") {
		if m := regexp.MustCompile("^- `([^`]+)`:").FindStringSubmatch(l); m != nil {
			reasons[m[1]] = true
		}
	}
	sizes := map[string]int{}
	for _, top := range []string{"cmd", "internal", "sink", "sync", "apiclient"} {
		err := filepath.WalkDir(filepath.Join("..", top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			pkg := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))
			if strings.Contains(pkg, "test") { // sinktest, apptest, apitest: the tests' support
				return nil
			}
			sizes[pkg] += countLines(t, path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(sizes) < 10 {
		t.Fatalf("found %d packages; the walk missed the code", len(sizes))
	}
	for pkg, n := range sizes {
		if n > largeLimit && !reasons[pkg] {
			t.Errorf("%s has %d lines of Go, more than %d, and %s gives no reason under \"Packages above 2 000 lines\"", pkg, n, largeLimit, designDoc)
		}
	}
	for pkg := range reasons {
		if sizes[pkg] <= 2000 {
			t.Errorf("%s gives a reason for the size of %s, which has %d lines: take it out", designDoc, pkg, sizes[pkg])
		}
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		n++
	}
	return n
}

// Every package of the layout and every path the document names in code
// quotes exists; a path with an exported name after its package's
// (`sink/schema/migrate.Apply`) names what that package declares, so that
// the package the document places it in is the one it is in.
func TestDesignPathsExist(t *testing.T) {
	doc := readDoc(t, designDoc)
	layout := section(t, doc, designDoc, "## Layout")
	block := layout[strings.Index(layout, "```\n")+4:]
	block = block[:strings.Index(block, "```")]
	var paths []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.Contains(f[0], "…") {
			paths = append(paths, f[0])
		}
	}
	for _, m := range regexp.MustCompile("`((?:cmd|internal|sink|sync|apiclient|scripts|deployments|docs)/[A-Za-z0-9_./-]+)`").FindAllStringSubmatch(doc, -1) {
		paths = append(paths, m[1])
	}
	if len(paths) < 30 {
		t.Fatalf("found %d paths in %s; the parse missed them", len(paths), designDoc)
	}
	declared := regexp.MustCompile(`^(.+)\.([A-Z][A-Za-z0-9_]*)$`)
	symbols := 0
	for _, p := range paths {
		if m := declared.FindStringSubmatch(p); m != nil {
			symbols++
			if !declares(t, m[1], m[2]) {
				t.Errorf("%s names %s: package %s declares no %s", designDoc, p, m[1], m[2])
			}
			continue
		}
		if _, err := os.Stat(filepath.Join("..", strings.TrimSuffix(p, "/"))); err != nil {
			t.Errorf("%s names %s: %v", designDoc, p, err)
		}
	}
	if symbols == 0 {
		t.Errorf("%s names no package's declaration, such as sink/schema/migrate.Apply: the parse missed them", designDoc)
	}
}

// declares reports whether the package in dir (tests left out) declares
// name at its top level.
func declares(t *testing.T, dir, name string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == name {
					return true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.Name == name {
							return true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.Name == name {
								return true
							}
						}
					}
				}
			}
		}
	}
	return false
}
