package deployments_test

// The operations dashboard charts readsync's own Prometheus metrics.
// Grafana cannot run here, so its expressions are checked as Grafana's
// Prometheus data source would send them (its docs: Template variables,
// "$__rate_interval"; a multi-value variable with All selected and an
// allValue sends the allValue as it is), by promtool, on the series of the
// rules' unit tests and a few of the metrics no alert reads: each must
// parse and return series there, so that a renamed metric or label fails.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	kyaml "sigs.k8s.io/yaml"
)

const (
	// operationsDashboardFile is the dashboard of readsync's metrics.
	operationsDashboardFile = "grafana/readsync-operations.json"
	// operationsSeriesFile holds series of the metrics the dashboard
	// charts beside those of rulesTestFile.
	operationsSeriesFile = "testdata/operations-dashboard-series.yaml"
)

// promDashboard is the part of a Grafana dashboard these tests read.
type promDashboard struct {
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			IncludeAll bool   `json:"includeAll"`
			AllValue   string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int               `json:"id"`
		Type       string            `json:"type"`
		Title      string            `json:"title"`
		Datasource map[string]string `json:"datasource"`
		GridPos    struct{ X, Y, W, H int }
		Targets    []struct {
			Datasource map[string]string `json:"datasource"`
			Expr       string            `json:"expr"`
			RefID      string            `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

func readOperationsDashboard(t *testing.T) promDashboard {
	t.Helper()
	b, err := os.ReadFile(operationsDashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d promDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", operationsDashboardFile, err)
	}
	return d
}

// The dashboard is one Grafana imports: the schema version of the
// repository's other dashboard, a data source variable of type
// prometheus that every panel and query uses, panel ids of their own,
// panels within the grid's 24 columns, a query in each.
func TestOperationsDashboardShape(t *testing.T) {
	d := readOperationsDashboard(t)
	var other promDashboard
	if err := json.Unmarshal([]byte(readRepoFile(t, "deployments/"+dashboardFile)), &other); err != nil {
		t.Fatal(err)
	}
	if d.UID != "readsync-operations" || d.SchemaVersion != other.SchemaVersion {
		t.Errorf("%s: uid %q, schemaVersion %d; want readsync-operations and %s's %d", operationsDashboardFile, d.UID, d.SchemaVersion, dashboardFile, other.SchemaVersion)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Name == "datasource" && (v.Type != "datasource" || v.Query != "prometheus") {
			t.Errorf("variable datasource: type %s, query %v; want a data source variable of Prometheus", v.Type, v.Query)
		}
		if v.Name == "namespace" && (!v.IncludeAll || v.AllValue != ".*") {
			t.Errorf("variable namespace: includeAll %t, allValue %q; want All as .*", v.IncludeAll, v.AllValue)
		}
	}
	if !vars["datasource"] || !vars["namespace"] {
		t.Errorf("%s: variables %v, want datasource and namespace", operationsDashboardFile, vars)
	}
	ids := map[int]bool{}
	want := map[string]string{"type": "prometheus", "uid": "${datasource}"}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d taken", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: x %d, w %d, beyond the grid's 24 columns", p.Title, p.GridPos.X, p.GridPos.W)
		}
		if p.Type == "row" {
			continue
		}
		if fmt.Sprint(p.Datasource) != fmt.Sprint(want) || len(p.Targets) == 0 {
			t.Errorf("panel %q: data source %v, %d queries; want %v and a query", p.Title, p.Datasource, len(p.Targets), want)
		}
		for _, q := range p.Targets {
			if fmt.Sprint(q.Datasource) != fmt.Sprint(want) || q.Expr == "" {
				t.Errorf("panel %q, query %s: data source %v, expression %q", p.Title, q.RefID, q.Datasource, q.Expr)
			}
		}
	}
}

// grafanaVariable finds the variables of an expression.
var grafanaVariable = regexp.MustCompile(`\$\{?([A-Za-z_]+)\}?`)

// interpolate is what Grafana's Prometheus data source sends for expr
// with every variable at its default: $__rate_interval as at least four
// scrape intervals (a minute here), the namespace with All selected.
func interpolate(expr string) (string, error) {
	var unknown []string
	out := grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		switch grafanaVariable.FindStringSubmatch(v)[1] {
		case "__rate_interval":
			return "4m"
		case "namespace":
			return ".*"
		}
		unknown = append(unknown, v)
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("variables %q, which the check does not know", unknown)
	}
	return out, nil
}

// Every query of the dashboard, as Grafana sends it, returns series on
// the rules' test series and the dashboard's own: promtool evaluates each
// at the 30th minute of one sample a minute.
func TestOperationsDashboardQueries(t *testing.T) {
	type series struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	var rules struct {
		Tests []struct {
			InputSeries []series `json:"input_series"`
		} `json:"tests"`
	}
	if err := kyaml.Unmarshal([]byte(readRepoFile(t, "deployments/"+rulesTestFile)), &rules); err != nil {
		t.Fatal(err)
	}
	var own []series
	if err := kyaml.Unmarshal([]byte(readRepoFile(t, "deployments/"+operationsSeriesFile)), &own); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var input []series
	for _, s := range append(own, func() (all []series) {
		for _, g := range rules.Tests {
			all = append(all, g.InputSeries...)
		}
		return all
	}()...) {
		if !seen[s.Series] { // a story told twice keeps its first values
			seen[s.Series] = true
			input = append(input, s)
		}
	}

	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	type exprTest struct {
		Expr       string   `json:"expr"`
		EvalTime   string   `json:"eval_time"`
		ExpSamples []sample `json:"exp_samples"`
	}
	var cases []exprTest
	d := readOperationsDashboard(t)
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			expr, err := interpolate(q.Expr)
			if err != nil {
				t.Errorf("panel %q, query %s: %v", p.Title, q.RefID, err)
				continue
			}
			cases = append(cases, exprTest{Expr: "clamp_max(count(" + expr + "), 1)", EvalTime: "30m",
				ExpSamples: []sample{{Labels: "{}", Value: 1}}})
		}
	}
	if len(cases) == 0 {
		t.Fatalf("%s: no queries", operationsDashboardFile)
	}
	doc, err := kyaml.Marshal(map[string]any{
		"evaluation_interval": "1m",
		"tests":               []any{map[string]any{"interval": "1m", "input_series": input, "promql_expr_test": cases}},
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard.test.yaml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, nil, "test", "rules", file); err != nil {
		// promtool names each expression that failed, and what it got.
		t.Errorf("the queries of %s on the rules' test series: %v\n%s", operationsDashboardFile, err, strings.TrimSpace(out))
	}
}
