package sync

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A schedule's inline names and its file's are one list, each name once;
// the file's path is relative to the schedules file, its comments, blank
// lines and surrounding blanks (a CRLF's CR among them) are not names.
func TestResolveNamesUnionOfSources(t *testing.T) {
	s, err := LoadSchedules(filepath.Join("testdata", "schedules", "sources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join("testdata", "names", "good.txt"); s[0].NamesFile != want {
		t.Errorf("nft_names_file resolved to %q, want %q", s[0].NamesFile, want)
	}
	names, counts, err := ResolveNames(context.Background(), s[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"alice.dmail", "bob.dmail", "café-☕.eth", "zed.dmail"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	if want := []SourceCount{{SourceInline, 2}, {SourceFile, 4}}; !slices.Equal(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}

// A names file that is not one name a line is an error naming the line,
// and the schedule and the source around it.
func TestNamesFileErrors(t *testing.T) {
	long := strings.Repeat("é", MaxNameLength+1)
	for _, tt := range []struct {
		name, content, want string
	}{
		{"not UTF-8", "alice.dmail\nbob\xff.dmail\n", "line 2: not UTF-8"},
		{"a line longer than a name", "alice.dmail\n" + long + "\n", "line 2: 254 characters, longer than a name can be (253)"},
		{"a line longer than the reader's buffer", strings.Repeat("a", 70_000), "a line longer than a name can be (253 characters)"},
		{"missing", "", "no such file or directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "names.txt")
			if tt.name != "missing" {
				if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := Schedule{Name: "hourly", NamesFile: path}
			names, _, err := ResolveNames(context.Background(), s, nil)
			var se *SourceError
			if !errors.As(err, &se) {
				t.Fatalf("error %v, want a SourceError", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), `schedule "hourly": nft_names_file `+path+": ") {
				t.Errorf("error %q, want it to name the schedule, the file and %q", err, tt.want)
			}
			if len(names) != 0 {
				t.Errorf("names %q from a file that failed", names)
			}
		})
	}
}

// A source that fails at a pass leaves the pass the schedule's last list
// that resolved, saying it is stale and why; before any list resolved,
// there is none. A list that resolves again replaces it.
func TestResolverKeepsTheLastList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "names.txt")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := Schedule{Name: "hourly", NamesFile: path}
	r := NewResolver(nil)
	if res := r.Resolve(context.Background(), s); res.Err == nil || len(res.Names) != 0 || res.Stale {
		t.Errorf("no file, no list before: %+v, want an error and no names", res)
	}
	write("a.dmail\nb.dmail\n")
	if res := r.Resolve(context.Background(), s); res.Err != nil || !slices.Equal(res.Names, []string{"a.dmail", "b.dmail"}) {
		t.Errorf("after the file appeared: %+v", res)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	res := r.Resolve(context.Background(), s)
	if res.Err == nil || !res.Stale || !slices.Equal(res.Names, []string{"a.dmail", "b.dmail"}) {
		t.Errorf("after the file disappeared: %+v, want the last list, stale, with the error", res)
	}
	write("c.dmail\n")
	if res := r.Resolve(context.Background(), s); res.Err != nil || res.Stale || !slices.Equal(res.Names, []string{"c.dmail"}) {
		t.Errorf("after the file came back: %+v", res)
	}
	write("# nobody\n")
	if res := r.Resolve(context.Background(), s); res.Err != nil || len(res.Names) != 0 {
		t.Errorf("a file of no names: %+v, want no names and no error", res)
	}
}
