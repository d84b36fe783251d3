package deployments_test

// The alerts' thresholds and intervals are values of the Helm chart
// (prometheusRule.alerts); the rule file keeps the defaults, which the
// chart renders unchanged (TestChartMonitoring).

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	kyaml "sigs.k8s.io/yaml"

	"github.com/readsync/readsync/deployments/deploytest"
)

// tunedRulesTestFile holds the promtool unit tests of the rules as the
// chart renders them with tunedValues.
const tunedRulesTestFile = "prometheus/readsync.rules.tuned.test.yaml"

// tunedValues are the values tunedRulesTestFile assumes.
var tunedValues = []string{
	"--set", "prometheusRule.alerts.ReadsyncNoSuccessfulPass.afterSeconds=172800",
	"--set", "prometheusRule.alerts.ReadsyncPassesPartial.window=2d",
	"--set", "prometheusRule.alerts.ReadsyncHistoryOutgrowsDisk.budgetBytes=536870912000",
	"--set", "prometheusRule.alerts.ReadsyncHistoryOutgrowsDisk.for=30m",
	"--set", "prometheusRule.alerts.ReadsyncVerifyFailed.jobPattern=nightly-check-[0-9]+",
	"--set", "prometheusRule.alerts.ReadsyncNamesFailing.window=6h",
	"--set", "prometheusRule.alerts.ReadsyncNothingDelivered.afterSeconds=86400",
	"--set", "prometheusRule.alerts.ReadsyncClickHouseRefuses.for=1h",
	"--set", "prometheusRule.alerts.ReadsyncSpoolGrowing.window=2h",
	"--set", "prometheusRule.alerts.ReadsyncSpoolRefusing.window=1h",
	"--set", "prometheusRule.alerts.ReadsyncUpstreamDown.for=2h",
	"--set-json", "prometheusRule.alerts.ReadsyncUpstreamDegraded.failedRatio=0.05",
	"--set", "prometheusRule.alerts.ReadsyncUpstreamDegraded.window=1h",
	"--set", "prometheusRule.alerts.ReadsyncShardCountsDisagree.for=2h",
	"--set", "prometheusRule.alerts.ReadsyncShardsMissing.for=2h",
	"--set", "prometheusRule.alerts.ReadsyncReconcileBehind.lagSeconds=7200",
	"--set", "prometheusRule.alerts.ReadsyncReconcileBehind.for=1h",
	"--set", "prometheusRule.alerts.ReadsyncNamesUnresolved.afterSeconds=21600",
	"--set", "prometheusRule.alerts.ReadsyncNamesNotRead.for=1h",
	"--set", "prometheusRule.alerts.ReadsyncExpiryBehind.marginSeconds=7776000",
	"--set", "prometheusRule.alerts.ReadsyncExpiryBehind.for=3h",
}

// renderedRules renders the chart's PrometheusRule with flags and returns
// its rules by alert.
func renderedRules(t *testing.T, flags ...string) (monitoringv1.PrometheusRuleSpec, map[string]monitoringv1.Rule) {
	t.Helper()
	m := deploytest.HelmTemplate(t, "prod", append([]string{"--set", "prometheusRule.enabled=true"}, flags...)...)
	rule := one[monitoringv1.PrometheusRule](t, m)
	byAlert := map[string]monitoringv1.Rule{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			byAlert[r.Alert] = r
		}
	}
	return rule.Spec, byAlert
}

// chartAlertValues reads the defaults of prometheusRule.alerts from the
// chart's values.yaml.
func chartAlertValues(t *testing.T) map[string]map[string]any {
	t.Helper()
	var values struct {
		PrometheusRule struct {
			Alerts map[string]map[string]any `json:"alerts"`
		} `json:"prometheusRule"`
	}
	if err := kyaml.Unmarshal([]byte(readRepoFile(t, "deployments/helm/readsync/values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	return values.PrometheusRule.Alerts
}

// Every value of prometheusRule.alerts changes its alert: set to another
// value, the alert's for is that value, or its expression holds it where
// it held the default; and every value names an alert of the rule file.
// Every alert with a threshold, a window or a for has a value for each.
func TestChartAlertValuesChangeTheirAlert(t *testing.T) {
	defaults := chartAlertValues(t)
	_, before := renderedRules(t)
	var flags []string
	want := map[string]map[string]string{} // alert → value → what it renders as
	for _, alert := range slices.Sorted(maps.Keys(defaults)) {
		if _, ok := before[alert]; !ok {
			t.Errorf("values.yaml: prometheusRule.alerts.%s names no alert of %s", alert, rulesFile)
		}
		want[alert] = map[string]string{}
		for name, v := range defaults[alert] {
			var other, rendered string
			flag := "--set-json" // numbers: --set reads 0.77 as a string
			switch name {
			case "for", "window":
				flag, other, rendered = "--set", "17m", "17m"
			case "jobPattern":
				flag, other, rendered = "--set", `nightly-[0-9]+`, `nightly-[0-9]+`
			default:
				if f, ok := v.(float64); ok && f < 1 {
					other, rendered = "0.77", "0.77"
				} else {
					other, rendered = "123457", "123457"
				}
			}
			if name == "window" {
				rendered = "[17m]"
			}
			flags = append(flags, flag, fmt.Sprintf("prometheusRule.alerts.%s.%s=%s", alert, name, other))
			want[alert][name] = rendered
		}
	}
	_, after := renderedRules(t, flags...)
	for alert, values := range want {
		for name, rendered := range values {
			r, was := after[alert], before[alert]
			switch {
			case name == "for" && (r.For == nil || string(*r.For) != rendered):
				t.Errorf("%s.for=%s renders for %v", alert, rendered, r.For)
			case name != "for" && (!strings.Contains(r.Expr.String(), rendered) || r.Expr.String() == was.Expr.String()):
				t.Errorf("%s.%s changed: expression\n%s\nwant %s in it instead of the default", alert, name, r.Expr.String(), rendered)
			}
		}
	}
	for alert, r := range before {
		_, tuned := defaults[alert]
		hasNumbers := strings.ContainsAny(r.Expr.String(), "[") || r.For != nil
		if hasNumbers && !tuned {
			t.Errorf("alert %s has a window or a for, and no value of prometheusRule.alerts", alert)
		}
	}
}

// The chart's rules with other values than the defaults load in
// Prometheus and pass the unit tests written for those values.
func TestChartTunedAlertsPassPromtool(t *testing.T) {
	spec, _ := renderedRules(t, tunedValues...)
	b, err := kyaml.Marshal(map[string]any{"groups": spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "readsync.rules.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(tunedRulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, filepath.Base(tunedRulesTestFile))
	if err := os.WriteFile(testFile, tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", filepath.Join(dir, "readsync.rules.yaml")}, {"test", "rules", testFile}} {
		if out, err := promtool(t, nil, args...); err != nil {
			t.Errorf("%v:\n%s", err, out)
		}
	}
}

// tunedFlags splits tunedValues by the value each pair of flags sets, as
// alert.name.
func tunedFlags(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for i := 0; i+1 < len(tunedValues); i += 2 {
		key, _, ok := strings.Cut(strings.TrimPrefix(tunedValues[i+1], "prometheusRule.alerts."), "=")
		if !ok || !strings.HasPrefix(tunedValues[i], "--set") {
			t.Fatalf("tunedValues: %q %q is no --set of a value", tunedValues[i], tunedValues[i+1])
		}
		out[key] = tunedValues[i : i+2]
	}
	return out
}

// promtoolOnLabels runs the unit test groups tests on the rules of spec,
// both without annotations (removed in place): what fires and when,
// whatever the summaries say of the values.
func promtoolOnLabels(t *testing.T, spec monitoringv1.PrometheusRuleSpec, tests []any) (string, error) {
	t.Helper()
	for _, g := range spec.Groups {
		for i := range g.Rules {
			g.Rules[i].Annotations = nil
		}
	}
	for _, g := range tests {
		cases, _ := g.(map[string]any)["alert_rule_test"].([]any)
		for _, c := range cases {
			exp, _ := c.(map[string]any)["exp_alerts"].([]any)
			for _, a := range exp {
				delete(a.(map[string]any), "exp_annotations")
			}
		}
	}
	dir := t.TempDir()
	rules, err := kyaml.Marshal(map[string]any{"groups": spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	file, err := kyaml.Marshal(map[string]any{"rule_files": []string{"readsync.rules.yaml"}, "evaluation_interval": "1m", "tests": tests})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"readsync.rules.yaml": rules, "tests.yaml": file} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return promtool(t, nil, "test", "rules", filepath.Join(dir, "tests.yaml"))
}

// tunedTestGroups reads the test groups of tunedRulesTestFile by the
// alert they are named after.
func tunedTestGroups(t *testing.T) map[string][]any {
	t.Helper()
	var file struct {
		Tests []map[string]any `json:"tests"`
	}
	if err := kyaml.Unmarshal([]byte(readRepoFile(t, "deployments/"+tunedRulesTestFile)), &file); err != nil {
		t.Fatalf("%s: %v", tunedRulesTestFile, err)
	}
	out := map[string][]any{}
	for _, g := range file.Tests {
		name, _ := g["name"].(string)
		out[name] = append(out[name], g)
	}
	return out
}

// Every value of prometheusRule.alerts has a case that shows it changing
// when its alert fires: tunedValues sets each, and with one of them back
// at its default and the others as tuned, the cases of its alert in
// tunedRulesTestFile fail on what fires and when (their annotations, which
// name the values, left out), where with every value tuned they pass.
func TestChartTunedValuesChangeWhenAlertsFire(t *testing.T) {
	deploytest.ToolPath(t, promtoolTool) // skip before rendering anything
	flags := tunedFlags(t)
	spec, _ := renderedRules(t, tunedValues...)
	all := tunedTestGroups(t)
	var groups []any
	for _, name := range slices.Sorted(maps.Keys(all)) {
		groups = append(groups, all[name]...)
	}
	if out, err := promtoolOnLabels(t, spec, groups); err != nil {
		t.Fatalf("the tuned cases without annotations: %v\n%s", err, out)
	}
	defaults := chartAlertValues(t)
	for _, alert := range slices.Sorted(maps.Keys(defaults)) {
		for _, name := range slices.Sorted(maps.Keys(defaults[alert])) {
			key := alert + "." + name
			if _, ok := flags[key]; !ok {
				t.Errorf("tunedValues does not set prometheusRule.alerts.%s: no case shows what it changes", key)
				continue
			}
			if len(all[alert]) == 0 {
				t.Errorf("%s: no test group named %s", tunedRulesTestFile, alert)
				continue
			}
			var others []string
			for k, f := range flags {
				if k != key {
					others = append(others, f...)
				}
			}
			spec, _ := renderedRules(t, others...)
			out, err := promtoolOnLabels(t, spec, all[alert])
			if err == nil {
				t.Errorf("%s at its default (%v), the others tuned: the cases of %s in %s still pass; want one that fires otherwise",
					key, defaults[alert][name], alert, tunedRulesTestFile)
			} else if !strings.Contains(out, "alertname: "+alert) {
				t.Errorf("%s at its default: promtool failed on something else than what %s fires:\n%s", key, alert, out)
			}
		}
	}
	for key := range flags {
		alert, name, _ := strings.Cut(key, ".")
		if _, ok := defaults[alert][name]; !ok {
			t.Errorf("tunedValues sets %s, which values.yaml does not have", key)
		}
	}
}

// k8sMonitoringTuned is the overlay the component's kustomization.yaml
// shows, which tunes two alerts for a daily schedule.
const k8sMonitoringTuned = "testdata/k8s-monitoring-tuned"

// The patch the component documents is the overlay's, word for word, and
// it applies: the alerts it names take the daily schedule's thresholds,
// and the others are the rule file's.
func TestKustomizeAlertPatch(t *testing.T) {
	overlay := readRepoFile(t, "deployments/"+k8sMonitoringTuned+"/kustomization.yaml")
	_, patch, ok := strings.Cut(overlay, "patches:")
	if !ok {
		t.Fatalf("%s has no patches", k8sMonitoringTuned)
	}
	var commented strings.Builder
	for line := range strings.Lines("patches:" + patch) {
		if strings.TrimSpace(line) == "" {
			commented.WriteString("#\n")
			continue
		}
		commented.WriteString("#   " + line)
	}
	if doc := readRepoFile(t, "deployments/k8s-monitoring/kustomization.yaml"); !strings.Contains(doc, commented.String()) {
		t.Errorf("deployments/k8s-monitoring/kustomization.yaml does not show the patch of %s:\n%s", k8sMonitoringTuned, commented.String())
	}

	m := deploytest.KustomizeBuild(t, k8sMonitoringTuned)
	rule := one[monitoringv1.PrometheusRule](t, m)
	groups := ruleGroups(t)
	for i, r := range rule.Spec.Groups[0].Rules {
		want := groups[0].Rules[i]
		switch r.Alert {
		case "ReadsyncNoSuccessfulPass":
			if e := r.Expr.String(); !strings.Contains(e, "> 172800") || strings.Contains(e, "7200)") {
				t.Errorf("patched %s: %s, want 172800 for 7200", r.Alert, e)
			}
		case "ReadsyncPassesPartial":
			if e := r.Expr.String(); strings.Count(e, "[2d]") != 2 {
				t.Errorf("patched %s: %s, want [2d] twice", r.Alert, e)
			}
		default:
			if r.Expr.String() != want.Expr.String() || r.Alert != want.Alert {
				t.Errorf("rule %d: %s %s, want the rule file's %s %s", i, r.Alert, r.Expr.String(), want.Alert, want.Expr.String())
			}
		}
	}
}

// Every alert's runbook_url points at its own section of docs/alerts.md,
// on the repository's main branch: a heading of the alert's name.
func TestAlertRunbooks(t *testing.T) {
	const base = "https://github.com/readsync/readsync/blob/main/docs/alerts.md#"
	doc := readRepoFile(t, "docs/alerts.md")
	for _, g := range ruleGroups(t) {
		for _, r := range g.Rules {
			url := r.Annotations["runbook_url"]
			if url != base+strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, url, base+strings.ToLower(r.Alert))
			}
			if !strings.Contains(doc, "\n## "+r.Alert+"\n") {
				t.Errorf("docs/alerts.md has no section \"## %s\", which its runbook_url points at", r.Alert)
			}
		}
	}
}
