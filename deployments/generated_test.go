package deployments_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/readsync/readsync/internal/manifests"
)

// The files of deployments/ that repeat another of the repository (kustomize
// and helm read no file outside their directories) are generated: each must
// be what `make manifests` makes of its source now, so that neither a copy
// edited by hand nor a source edited without generating again goes unnoticed.
func TestGeneratedFilesUpToDate(t *testing.T) {
	const root = ".."
	files, err := manifests.Generate(os.DirFS(root))
	if err != nil {
		t.Fatalf("make manifests would fail: %v", err)
	}
	if len(files) == 0 {
		t.Fatal("make manifests generates no file: this test no longer checks any")
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Errorf("%s, generated from %s: %v; run `make manifests`", f.Path, f.Source, err)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s is not what `make manifests` generates from %s%s; run `make manifests` "+
				"(edit %s, never the generated file)", f.Path, f.Source, firstDifferentLine(got, f.Data), f.Source)
		}
	}
}

// firstDifferentLine says where a file first differs from what it should be.
func firstDifferentLine(got, want []byte) string {
	g, w := slices.Collect(bytes.Lines(got)), slices.Collect(bytes.Lines(want))
	for i := range max(len(g), len(w)) {
		switch {
		case i >= len(g):
			return fmt.Sprintf(" (it ends before line %d, %q)", i+1, w[i])
		case i >= len(w):
			return fmt.Sprintf(" (line %d, %q, is past its end)", i+1, g[i])
		case !bytes.Equal(g[i], w[i]):
			return fmt.Sprintf(" (line %d is %q, want %q)", i+1, g[i], w[i])
		}
	}
	return ""
}
