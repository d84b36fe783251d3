package sinktest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// FirstReleaseSchema returns the statements with which readsync 0.1.0, the
// first release, created database db, from testdata/release-0.1.0/schema.sql
// beside this file: its tables, and its views, which aggregate the whole
// snapshot history at every query. Upgrade tests start from it. The file
// is found from this source file's place, so that tests of any package
// read the one copy.
func FirstReleaseSchema(t testing.TB, db string) []string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("sinktest: cannot tell where its source is, to find testdata/release-0.1.0")
	}
	file := filepath.Join(filepath.Dir(self), "testdata", "release-0.1.0", "schema.sql")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return SplitScript(string(src), db)
}

// SplitScript returns the statements of a script whose statements end
// with a line holding only ";" and whose lines starting with "--" are
// comments, with {db} replaced by db.
func SplitScript(src, db string) []string {
	var body []string
	for _, line := range strings.Split(src, "\n") {
		if !strings.HasPrefix(line, "--") {
			body = append(body, line)
		}
	}
	var out []string
	for _, stmt := range strings.Split(strings.Join(body, "\n"), "\n;\n") {
		if stmt = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(stmt), ";")); stmt != "" {
			out = append(out, strings.ReplaceAll(stmt, "{db}", db))
		}
	}
	return out
}
