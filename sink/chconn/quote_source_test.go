package chconn_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Values reach SQL one of two ways: as the driver's bound arguments, or
// through this package's quoting helpers (QuoteString, QuoteIdent,
// QuoteDate, DateTime), which escape what would end the quotes. A value
// quoted by hand, in a format ('%s') or between two literals ("= '" + v +
// "'"), is neither: a quote or backslash in it ends the literal early. No
// statement readsync builds quotes by hand: the helpers are the only code
// of its packages that writes a quote around a value. (The tests and the
// benchmarks, which quote the names they made up themselves, are not
// readsync's statements.)
func TestNoValueIsQuotedByHand(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	helpers := filepath.Join(root, "sink", "chconn", "quote.go")
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || testSupport[name]) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		top, _, _ := strings.Cut(rel, string(filepath.Separator))
		if !shipped[top] || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == helpers {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if why := handQuoted(s); why != "" {
				t.Errorf("%s:%d: %s in %s; bind the value or use chconn.QuoteString, QuoteIdent, QuoteDate or DateTime",
					rel, fset.Position(lit.Pos()).Line, why, lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d Go files; the walk missed the repository", checked)
	}
}

// shipped names the top directories of the packages readsync is built
// from; testSupport the directories below them that only tests import.
var (
	shipped     = map[string]bool{"cmd": true, "internal": true, "sink": true, "sync": true, "apiclient": true}
	testSupport = map[string]bool{"testdata": true, "sinktest": true, "apptest": true, "deploytest": true}
)

// handQuoted says how the string literal s quotes a value by hand, or
// returns "" when it does not. It looks only at literals that read as
// SQL, and reads them as ClickHouse does: a quote opens a literal or a
// name that the same quote closes, a backslash escapes the next
// character, and %% in a format is a percent sign.
func handQuoted(s string) string {
	if !sqlWords.MatchString(s) {
		return ""
	}
	var open rune // the quote of the literal or name being read, or 0
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\\':
			i++
		case open == 0 && (r == '\'' || r == '`'):
			open = r
		case r == open:
			open = 0
		case open != 0 && r == '%' && i+1 < len(rs) && rs[i+1] == '%':
			i++
		case open != 0 && r == '%' && formatVerb.MatchString(string(rs[i+1:])):
			return "a format verb between quotes"
		}
	}
	if open != 0 {
		return "an unpaired " + string(open) + " (a value spliced between two literals)"
	}
	return ""
}

// formatVerb matches what follows the % of a format verb.
var formatVerb = regexp.MustCompile(`^[-+# 0-9.\[\]]*[a-zA-Z]`)

// sqlWords picks the literals that are SQL or part of it.
var sqlWords = regexp.MustCompile(`\b(SELECT|INSERT|ALTER|CREATE|DROP|RENAME|WHERE|AND|FROM|SETTINGS|VALUES)\b|\btoDate(Time)?\(`)

// The check itself finds what it is for.
func TestHandQuotedFindsEachForm(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"SELECT 1 FROM t WHERE name = '%s'", true},
		{"WHERE database = '", true},
		{"' AND x = 1", true},
		{"SELECT * FROM `", true},
		{"toDate('", true},
		{"SELECT 1 FROM t WHERE name = ?", false},
		{"SELECT 1 FROM t WHERE phase = 'copy' AND p = %d", false},
		{"INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s", false},
		{"it's a log line", false},
		{"SELECT concat('name-', toString(number %% %d), '.eth')", false},
		{"SELECT 'run-%d' AS run", true},
		{"SELECT x FROM t WHERE s = 'it\\'s' AND y = %d", false},
		{"SELECT x FROM t WHERE s LIKE '100%%'", false},
		{"SELECT count() FROM system.tables WHERE engine LIKE 'Replicated%' AND database = ?", false},
	} {
		if got := handQuoted(tc.s) != ""; got != tc.want {
			t.Errorf("handQuoted(%q) = %q, want found %v", tc.s, handQuoted(tc.s), tc.want)
		}
	}
}
