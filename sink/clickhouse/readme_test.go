package clickhouse_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink/sinktest/historytest"
)

// readmeQueries returns the statements of the sql blocks of the README
// and the docs; a blank line separates two statements.
func readmeQueries(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, f := range append(files, "../../README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(b)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(text.String(), -1) {
		for _, q := range strings.Split(m[1], "\n\n") {
			if q = strings.TrimSpace(q); q != "" {
				out = append(out, q)
			}
		}
	}
	return out
}

// Every query the README and the docs show runs, as written, on a
// database readsync set up, with the server's default settings: run on both
// tested releases by `make test`.
func TestREADMEQueriesRun(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	historytest.WriteViewFixture(t, ch)
	conn := db.OpenCurrent(t)
	qs := readmeQueries(t)
	if len(qs) < 6 {
		t.Fatalf("found %d queries in the sql blocks of the README and the docs", len(qs))
	}
	for _, q := range qs {
		if strings.HasPrefix(strings.TrimSpace(q), "CREATE") {
			// A table of the user's that the docs show, such as a list of
			// names to fetch: created in the test's database.
			if err := conn.Exec(context.Background(), q); err != nil {
				t.Errorf("%v\n%s", err, q)
			}
			continue
		}
		rows, err := conn.Query(context.Background(), q)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		if err != nil {
			t.Errorf("%v\n%s", err, q)
		}
	}
}
