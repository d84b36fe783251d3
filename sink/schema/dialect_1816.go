package schema

import "regexp"

// shapesOneServerRefuses are SQL shapes that one of the tested servers
// refuses, each with the reason: the rules of the dialect the migrations
// and views are written in (package migrate, views.go), in a form a
// statement can be held to. No statement readsync sends may have one.
// The dialect is what 18.16 and current releases share; for a current
// release alone, the rows that name 18.16 would go, and the statements
// would use what they forbid (ADD COLUMN IF NOT EXISTS instead of package
// migrate's look in system.columns, CREATE OR REPLACE VIEW, window
// functions).
var shapesOneServerRefuses = []struct {
	re     *regexp.Regexp
	reason string
}{
	{regexp.MustCompile(`\)\s*(ANY\s+|ALL\s+)?(LEFT\s+|INNER\s+)?JOIN`), "a joined subquery without an alias: current releases refuse it (joined_subquery_requires_alias)"},
	{regexp.MustCompile(`JOIN\s*\((?s:[^()]|\([^()]*\))*\)\s*USING`), "a subquery joined without an alias: current releases refuse it"},
	{regexp.MustCompile(`ADD COLUMN IF NOT EXISTS`), "18.16 has no ADD COLUMN IF NOT EXISTS"},
	{regexp.MustCompile(`CREATE OR REPLACE`), "18.16 has no CREATE OR REPLACE"},
	{regexp.MustCompile(`\b(DateTime64|LowCardinality|Bool)\b|\bTTL\b|\bOVER\s*\(`), "a type or clause 18.16 does not have"},
}

// RefusedBy returns, for each shape of the statement q that one of the
// tested servers refuses, the reason; nothing for a statement both take.
// The tests hold every statement readsync renders and sends to it.
func RefusedBy(q string) []string {
	var reasons []string
	for _, s := range shapesOneServerRefuses {
		if s.re.MatchString(q) {
			reasons = append(reasons, s.reason)
		}
	}
	return reasons
}
