package grafana_test

// What Grafana and its ClickHouse data source plugin
// (grafana-clickhouse-datasource, version 4) make of a dashboard's SQL
// before ClickHouse sees it, for the tests of the dashboard. Grafana cannot
// run in these tests, so this file follows their code and docs:
//
//   - The plugin's frontend, src/data/CHDatasource.ts (the same from v4.0.0
//     to v4.20.0): metricFindQuery turns a variable query's result into
//     options; applyTemplateVariables replaces $__conditionalAll, then has
//     Grafana interpolate the variables with the plugin's format function as
//     the default format. Its docs: docs/sources/template-variables.md.
//   - Grafana's interpolation: public/app/features/templating/template_srv.ts
//     and, for dashboards run as scenes (Grafana 11 on), @grafana/scenes'
//     sceneInterpolator.ts, formatRegistry.ts and MultiValueVariable.ts; the
//     formats as Grafana's docs list them (Variable syntax, Advanced variable
//     format options).
//   - The plugin's backend: pkg/macros/macros.go (the same SQL for the macros
//     below since v4.0.3; v4.0.0 to v4.0.2 filtered time with toDateTime64,
//     which ClickHouse 18.16 lacks), which parses macros with
//     github.com/grafana/macropro (parser.go); grafana/sqlds runs each query
//     under the data source's query timeout.
//
// The plugin's Go module is not a dependency: its go.mod names the module
// github.com/grafana/clickhouse-datasource, without the /v4 suffix that Go
// requires of a module tagged v4.x, so Go refuses to require any v4 release
// of it (only a pseudo-version of a commit), and neither it nor macropro could
// be had from the Go module proxy. So the little of it that the dashboard
// uses is written here from its source, and anything else fails the test
// rather than reach ClickHouse in a form the plugin would not send.

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
)

// grafanaAllValue is the value Grafana stores when a variable's All option
// is selected (ALL_VARIABLE_VALUE in Grafana and in scenes).
const grafanaAllValue = "$__all"

// grafanaOption is one option of a query variable: Text is what the
// drop-down shows, Value what queries get.
type grafanaOption struct{ Text, Value string }

// grafanaVariable is a dashboard variable as the queries of a panel see it.
type grafanaVariable struct {
	Multi   bool
	Options []grafanaOption
	// Current holds the selected values; {grafanaAllValue} for All.
	Current []string
}

func (v *grafanaVariable) allSelected() bool {
	return len(v.Current) > 0 && v.Current[0] == grafanaAllValue
}

// values returns what Grafana hands a format: under All, the value of every
// option (a variable without a custom all value, which this model refuses),
// else the selected ones.
func (v *grafanaVariable) values() []string {
	if !v.allSelected() {
		return v.Current
	}
	out := make([]string, len(v.Options))
	for i, o := range v.Options {
		out[i] = o.Value
	}
	return out
}

// pluginVariableOptions turns a variable query's result into options as the
// plugin's metricFindQuery does: with one column, each value is both text
// and value; with more, the first column is the value and the second the
// text. Column names play no part (an alias such as __text changes nothing).
func pluginVariableOptions(rows [][]string) []grafanaOption {
	var out []grafanaOption
	for _, r := range rows {
		switch {
		case len(r) == 1:
			out = append(out, grafanaOption{Text: r[0], Value: r[0]})
		case len(r) > 1:
			out = append(out, grafanaOption{Text: r[1], Value: r[0]})
		}
	}
	return out
}

// pluginApplyTemplateVariables is what the plugin's frontend sends its
// backend for a query's SQL: $__conditionalAll replaced first, then the
// variables interpolated by Grafana. The dashboard has no ad hoc filter
// variable, so the plugin adds no filter of its own.
func pluginApplyTemplateVariables(sql string, vars map[string]*grafanaVariable) (string, error) {
	sql, err := pluginConditionalAll(sql, vars)
	if err != nil {
		return "", err
	}
	return grafanaInterpolate(sql, vars)
}

// conditionalAllVar finds the variable that $__conditionalAll's second
// argument names, as ${name} or $name; ${name:format} names none, and then
// the condition always applies (the plugin's docs warn of this).
var conditionalAllVar = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

// pluginConditionalAll replaces each $__conditionalAll(condition, $var),
// last first, by 1=1 when $var's value is All or empty and by the condition
// otherwise. The plugin reads the variable's stored value (its
// current.value, joined with commas), not its interpolation, and splits the
// arguments at commas outside parentheses, quotes or not.
func pluginConditionalAll(sql string, vars map[string]*grafanaVariable) (string, error) {
	const macro = "$__conditionalAll("
	for i := strings.LastIndex(sql, macro); i >= 0; i = strings.LastIndex(sql, macro) {
		args := pluginMacroArgs(sql[i+len(macro)-1:])
		if len(args) != 2 {
			// The plugin then sends the query on as it is, and ClickHouse
			// rejects the macro.
			return "", fmt.Errorf("%s…) at byte %d has %d arguments; the plugin replaces it only with 2", macro, i, len(args))
		}
		phrase := args[0]
		if m := conditionalAllVar.FindStringSubmatch(strings.TrimSpace(args[1])); m != nil {
			if v, ok := vars[m[1]+m[2]]; ok {
				if s := strings.Join(v.Current, ","); s == "" || s == grafanaAllValue {
					phrase = "1=1"
				}
			}
		}
		sql = strings.Replace(sql, macro+args[0]+","+args[1]+")", phrase, 1)
	}
	return sql, nil
}

// pluginMacroArgs splits the arguments of a frontend macro, s starting at
// its opening parenthesis, as the plugin's getMacroArgs does: at commas one
// parenthesis deep, until the parenthesis that closes the first. It returns
// nil when none does.
func pluginMacroArgs(s string) []string {
	var args []string
	depth, start := 0, 1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 1 {
				args = append(args, s[start:i])
				start = i + 1
			}
			continue
		default:
			continue
		}
		if depth == 0 {
			return append(args, s[start:i])
		}
	}
	return nil
}

// grafanaVariableRef is Grafana's variableRegex: $name, [[name]] or
// [[name:format]], ${name}, ${name.field} or ${name:format}.
var grafanaVariableRef = regexp.MustCompile(`\$(\w+)|\[\[([\s\S]+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^}]+))?(?::([^}]+))?\}`)

// grafanaOwnVariables are the names Grafana itself gives a value (global
// variables and scenes' macros). The dashboard's SQL uses none of them; a
// reference to one fails the test instead of being left as it is, as every
// other $__name is, for the plugin's backend.
var grafanaOwnVariables = []string{"__from", "__to", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms",
	"__rate_interval", "__rate_interval_ms", "__timezone", "__dashboard", "__user", "__org", "__name", "__all_variables",
	"__url_time_range", "__url", "__value", "__data", "__series", "__field"}

// pluginDefaultFormat stands for the plugin's own format function, which it
// passes to Grafana for references without a format.
const pluginDefaultFormat = ""

// grafanaInterpolate replaces variable references as Grafana does. A
// reference to an unknown variable, which Grafana leaves as it is for
// ClickHouse to reject, fails here with its name.
func grafanaInterpolate(sql string, vars map[string]*grafanaVariable) (string, error) {
	var b strings.Builder
	last := 0
	for _, m := range grafanaVariableRef.FindAllStringSubmatchIndex(sql, -1) {
		group := func(i int) string {
			if m[2*i] < 0 {
				return ""
			}
			return sql[m[2*i]:m[2*i+1]]
		}
		ref, name, format := sql[m[0]:m[1]], group(1)+group(2)+group(4), group(3)+group(6)
		b.WriteString(sql[last:m[0]])
		last = m[1]
		v, ok := vars[name]
		switch {
		case !ok && strings.HasPrefix(name, "__") && !slices.Contains(grafanaOwnVariables, name):
			b.WriteString(ref) // a macro of the plugin's backend
			continue
		case !ok:
			return "", fmt.Errorf("%s: Grafana gives no value to %s here (this model knows the dashboard's variables only)", ref, name)
		case group(5) != "":
			return "", fmt.Errorf("%s: this model has no fields of variables", ref)
		}
		s, err := grafanaFormat(format, v.values(), v.Multi)
		if err != nil {
			return "", fmt.Errorf("%s: %w", ref, err)
		}
		b.WriteString(s)
	}
	b.WriteString(sql[last:])
	return b.String(), nil
}

// grafanaFormat formats a variable's values as Grafana's format registry
// does; list says whether Grafana holds them as a list (a multi-value
// variable's), else values has one.
func grafanaFormat(format string, values []string, list bool) (string, error) {
	each := func(quote func(string) string) string {
		q := make([]string, len(values))
		for i, v := range values {
			q[i] = quote(v)
		}
		return strings.Join(q, ",")
	}
	switch format {
	case pluginDefaultFormat:
		// The plugin's format function: a list as 'a','b', its values as
		// they are; one value as it is.
		if list {
			return "'" + strings.Join(values, "','") + "'", nil
		}
		return strings.Join(values, ""), nil
	case "csv", "raw":
		// raw is String(value), which joins a list with commas too.
		return strings.Join(values, ","), nil
	case "singlequote":
		return each(func(v string) string { return "'" + strings.ReplaceAll(v, "'", `\'`) + "'" }), nil
	case "sqlstring":
		return each(func(v string) string {
			return "'" + strings.NewReplacer("'", "''", `"`, `\"`).Replace(v) + "'"
		}), nil
	}
	return "", fmt.Errorf("format %q: this model knows csv, raw, singlequote, sqlstring and the plugin's default", format)
}

// pluginQuery is what the plugin's backend knows of a query besides its SQL
// (sqlutil.Query): the panel's time range and interval.
type pluginQuery struct {
	From, To time.Time
	Interval time.Duration
}

var pluginMacroName = regexp.MustCompile(`\$__(\w+)`)

// pluginExpandMacros expands the plugin's backend macros in sql, as
// pkg/macros.Interpolate does. The plugin leaves a macro it does not know
// for ClickHouse to reject; this fails on it with its name, and on a macro
// the plugin knows but this model does not.
func pluginExpandMacros(sql string, q pluginQuery) (string, error) {
	if strings.Contains(sql, "--") || strings.Contains(sql, "/*") {
		// The plugin blanks comments before it expands macros.
		return "", fmt.Errorf("the SQL has a comment, which this model of the plugin does not strip")
	}
	var b strings.Builder
	for {
		m := pluginMacroName.FindStringSubmatchIndex(sql)
		if m == nil {
			b.WriteString(sql)
			return b.String(), nil
		}
		name, rest := sql[m[2]:m[3]], sql[m[1]:]
		b.WriteString(sql[:m[0]])
		var args []string
		if end := closingParenthesis(rest); end > 0 {
			args = macroArgs(rest[1:end])
			rest = rest[end+1:]
		}
		s, err := pluginMacro(name, args, q)
		if err != nil {
			return "", err
		}
		// Scanned again: macropro expands one name at a time over the
		// whole query, so a macro in another's arguments is expanded too.
		sql = s + rest
	}
}

// pluginMacro is one macro of pkg/macros/macros.go.
func pluginMacro(name string, args []string, q pluginQuery) (string, error) {
	dateTime := func(t time.Time) string { return fmt.Sprintf("toDateTime(%d)", t.Unix()) }
	// The plugin formats days in the time zone of its process; the tests'
	// times are UTC, the dashboard's time zone.
	date := func(t time.Time) string { return fmt.Sprintf("toDate('%s')", t.Format(time.DateOnly)) }
	seconds := int(max(q.Interval.Seconds(), 1))
	oneArg := map[string]func(c string) string{
		"timeFilter": func(c string) string {
			return fmt.Sprintf("%s >= %s AND %s <= %s", c, dateTime(q.From), c, dateTime(q.To))
		},
		"dateFilter": func(c string) string { return fmt.Sprintf("%s >= %s AND %s <= %s", c, date(q.From), c, date(q.To)) },
		"timeInterval": func(c string) string {
			return fmt.Sprintf("toStartOfInterval(toDateTime(%s), INTERVAL %d second)", c, seconds)
		},
	}
	switch name {
	case "fromTime":
		return dateTime(q.From), nil
	case "toTime":
		return dateTime(q.To), nil
	case "interval_s":
		return strconv.Itoa(seconds), nil
	}
	f, ok := oneArg[name]
	if !ok {
		return "", fmt.Errorf("macro $__%s: not one of the plugin's this model knows (fromTime, toTime, interval_s, timeFilter, dateFilter, timeInterval)", name)
	}
	if len(args) != 1 {
		return "", fmt.Errorf("macro $__%s: expected 1 argument, received %d", name, len(args))
	}
	return f(args[0]), nil
}

// closingParenthesis returns the index of the parenthesis that closes the
// one s starts with, skipping quoted strings, or -1 when s starts with none
// or it is not closed (macropro then takes the macro as one without
// arguments).
func closingParenthesis(s string) int {
	if !strings.HasPrefix(s, "(") {
		return -1
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'', '"':
			i = endOfQuoted(s, i) - 1
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// macroArgs splits a backend macro's arguments at commas outside
// parentheses and quoted strings, trimmed; none when raw is blank.
func macroArgs(raw string) []string {
	if strings.TrimSpace(raw) == "" {
		return nil
	}
	var args []string
	depth, start := 0, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '\'', '"':
			i = endOfQuoted(raw, i) - 1
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				args = append(args, strings.TrimSpace(raw[start:i]))
				start = i + 1
			}
		}
	}
	return append(args, strings.TrimSpace(raw[start:]))
}

// endOfQuoted returns the index after the quoted string starting at
// s[open]: a doubled quote or a backslash escapes the next character, as in
// ClickHouse's strings.
func endOfQuoted(s string, open int) int {
	quote := s[open]
	for i := open + 1; i < len(s); i++ {
		switch {
		case s[i] == '\\':
			i++
		case s[i] == quote && i+1 < len(s) && s[i+1] == quote:
			i++
		case s[i] == quote:
			return i + 1
		}
	}
	return len(s)
}

// pluginQueryTimeout is the plugin's default query timeout: sqlds runs each
// query under it, and clickhouse-go sends it on as max_execution_time.
const pluginQueryTimeout = 60 * time.Second

// pluginRun runs sql as the plugin's backend does and returns the result's
// columns and rows. It runs with readonly = 2, the least a dashboard user
// needs: the user may change settings but writes nothing. readonly = 1
// refuses the plugin's max_execution_time on current releases and the read
// panels' SETTINGS clause on 18.16.
func pluginRun(conn chgo.Conn, sql string) (columns []string, rows [][]any, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), pluginQueryTimeout)
	defer cancel()
	ctx = chgo.Context(ctx, chgo.WithSettings(chgo.Settings{"readonly": 2}))
	r, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	types := r.ColumnTypes()
	for r.Next() {
		dest := make([]any, len(types))
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := r.Scan(dest...); err != nil {
			return nil, nil, err
		}
		row := make([]any, len(dest))
		for i, d := range dest {
			row[i] = reflect.ValueOf(d).Elem().Interface()
		}
		rows = append(rows, row)
	}
	return r.Columns(), rows, r.Err()
}

// grafanaText is a value as the plugin turns it into a variable's text or
// value: String(value), with NULL as empty.
func grafanaText(v any) string {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return ""
		}
		rv = rv.Elem()
	}
	return fmt.Sprint(rv.Interface())
}

// TestDashboardModelOfGrafana holds the model above to examples from the
// plugin's tests (src/data/CHDatasource.test.ts, pkg/macros/macros_test.go)
// and from Grafana's docs and format registry.
func TestDashboardModelOfGrafana(t *testing.T) {
	t.Run("variable options", func(t *testing.T) {
		for _, c := range []struct {
			rows [][]string
			want []grafanaOption
		}{
			{[][]string{{"a.eth"}}, []grafanaOption{{"a.eth", "a.eth"}}},
			{[][]string{{"7", "a.eth"}}, []grafanaOption{{Text: "a.eth", Value: "7"}}},
			{[][]string{{"7", "a.eth", "ignored"}}, []grafanaOption{{Text: "a.eth", Value: "7"}}},
		} {
			if got := pluginVariableOptions(c.rows); !slices.Equal(got, c.want) {
				t.Errorf("rows %q: options %+v, want %+v", c.rows, got, c.want)
			}
		}
	})
	t.Run("conditionalAll", func(t *testing.T) {
		const sql = "select stuff from table where $__conditionalAll(fieldVal in ($fieldVal), $fieldVal) and $__conditionalAll(fieldVal in ($fieldVal2), $fieldVal2);"
		for _, c := range []struct {
			current, current2 []string
			want              string
		}{
			{[]string{"'val1', 'val2'"}, []string{grafanaAllValue}, "select stuff from table where fieldVal in ($fieldVal) and 1=1;"},
			{[]string{grafanaAllValue}, []string{}, "select stuff from table where 1=1 and 1=1;"},
			{[]string{"1", "2"}, []string{"3"}, "select stuff from table where fieldVal in ($fieldVal) and fieldVal in ($fieldVal2);"},
		} {
			got, err := pluginConditionalAll(sql, map[string]*grafanaVariable{
				"fieldVal": {Current: c.current}, "fieldVal2": {Current: c.current2}})
			if err != nil || got != c.want {
				t.Errorf("values %q, %q:\n got %s (%v)\nwant %s", c.current, c.current2, got, err, c.want)
			}
		}
	})
	t.Run("formats", func(t *testing.T) {
		values := []string{"test'1", `te"st2`}
		for format, want := range map[string]string{
			"csv":               `test'1,te"st2`,
			"raw":               `test'1,te"st2`,
			"singlequote":       `'test\'1','te"st2'`,
			"sqlstring":         `'test''1','te\"st2'`,
			pluginDefaultFormat: `'test'1','te"st2'`,
		} {
			if got, err := grafanaFormat(format, values, true); err != nil || got != want {
				t.Errorf("format %q: %s (%v), want %s", format, got, err, want)
			}
		}
		vars := map[string]*grafanaVariable{"v": {Multi: true, Options: []grafanaOption{{"a", "1"}, {"b", "2"}}, Current: []string{grafanaAllValue}}}
		if got, err := grafanaInterpolate("x IN (${v:csv}) AND $__timeFilter(t) AND [[v]]", vars); err != nil ||
			got != "x IN (1,2) AND $__timeFilter(t) AND '1','2'" {
			t.Errorf("interpolated %s (%v)", got, err)
		}
	})
	t.Run("macros", func(t *testing.T) {
		q := pluginQuery{From: time.Unix(1415792726, 0).UTC(), To: time.Unix(1447328726, 0).UTC(), Interval: 90 * time.Second}
		for sql, want := range map[string]string{
			"select * from foo where $__timeFilter(cast(sth as timestamp) )": "select * from foo where cast(sth as timestamp) >= toDateTime(1415792726) AND cast(sth as timestamp) <= toDateTime(1447328726)",
			"select * from foo where $__timeFilter(coalesce(closed_at, $__toTime))": "select * from foo where coalesce(closed_at, toDateTime(1447328726)) >= toDateTime(1415792726) AND " +
				"coalesce(closed_at, toDateTime(1447328726)) <= toDateTime(1447328726)",
			"$__dateFilter(day)":                       "day >= toDate('2014-11-12') AND day <= toDate('2015-11-12')",
			"intDiv(x, $__interval_s) * $__interval_s": "intDiv(x, 90) * 90",
			"$__timeInterval(t)":                       "toStartOfInterval(toDateTime(t), INTERVAL 90 second)",
			"$__fromTime, $__toTime":                   "toDateTime(1415792726), toDateTime(1447328726)",
		} {
			if got, err := pluginExpandMacros(sql, q); err != nil || got != want {
				t.Errorf("%s:\n got %s (%v)\nwant %s", sql, got, err, want)
			}
		}
		for _, sql := range []string{"$__timeFilter(a, b)", "$__timeFilter", "$__unknown(x)", "-- $__fromTime"} {
			if got, err := pluginExpandMacros(sql, q); err == nil {
				t.Errorf("%s: expanded to %s, want an error", sql, got)
			}
		}
	})
}
