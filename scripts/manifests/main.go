// Command manifests writes the files of deployments/ that repeat a file
// kept elsewhere in the repository (package internal/manifests lists
// them) from their sources, and says which it changed.
//
// Usage (make manifests runs it):
//
//	go run ./scripts/manifests [-root .]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/readsync/readsync/internal/manifests"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("manifests", flag.ContinueOnError)
	flags.SetOutput(stderr)
	root := flags.String("root", ".", "the repository's root")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "manifests: unexpected arguments %q\n", flags.Args())
		return 2
	}
	files, err := manifests.Generate(os.DirFS(*root))
	if err != nil {
		fmt.Fprintf(stderr, "manifests: %v\n", err)
		return 1
	}
	for _, f := range files {
		changed, err := write(filepath.Join(*root, filepath.FromSlash(f.Path)), f.Data)
		if err != nil {
			fmt.Fprintf(stderr, "manifests: %v\n", err)
			return 1
		}
		if changed {
			fmt.Fprintf(stdout, "wrote %s (from %s)\n", f.Path, f.Source)
		}
	}
	return 0
}

// write writes data to the file at path unless it holds data already, and
// says whether it wrote.
func write(path string, data []byte) (bool, error) {
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, data):
		return false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	return true, nil
}
