package chconn

import (
	"fmt"
	"strings"
	"time"
)

// QuoteIdent quotes a name for ClickHouse. Names come from configuration
// (the database, the cluster), so a backtick or backslash in one is
// escaped rather than ending the quotes.
func QuoteIdent(s string) string {
	return "`" + strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(s) + "`"
}

// QuoteString quotes a string literal for ClickHouse.
func QuoteString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// DateTime writes the Unix time t as a DateTime literal.
func DateTime(t uint32) string { return fmt.Sprintf("toDateTime(%d)", t) }

// QuoteDate writes t's UTC day as a Date literal.
func QuoteDate(t time.Time) string { return "toDate('" + t.UTC().Format(time.DateOnly) + "')" }
