package deployments_test

// The alerts ship as files and are tested as code: promtool checks the rule
// file and runs its unit tests, which must cover every alert, and lints
// what the daemon serves on /metrics. prometheus_test.go runs the rules in
// a Prometheus against a running daemon.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	kjson "sigs.k8s.io/json"
	kyaml "sigs.k8s.io/yaml"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/deployments/deploytest"
	"github.com/readsync/readsync/internal/app"
	"github.com/readsync/readsync/internal/apptest"
)

const (
	// rulesFile is the shipped rule file; the kustomize component and the
	// Helm chart carry copies of its groups, which `make manifests` generates.
	rulesFile = "prometheus/readsync.rules.yaml"
	// rulesTestFile holds the promtool unit tests of rulesFile.
	rulesTestFile = "prometheus/readsync.rules.test.yaml"
)

// Debian's package prometheus has both tools.
var (
	promtoolTool   = deploytest.NewTool("promtool", "READSYNC_REQUIRE_PROMETHEUS", "--version")
	prometheusTool = deploytest.NewTool("prometheus", "READSYNC_REQUIRE_PROMETHEUS", "--version")
)

// promtool runs promtool with stdin and returns what it printed, both
// streams: its findings go to either.
func promtool(t *testing.T, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	path := deploytest.ToolPath(t, promtoolTool)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, path, args...)
	c.Stdin = stdin
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("promtool %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// decodeStrict decodes a YAML document into v as the API server's strict
// field validation would: unknown fields and duplicate keys are errors.
func decodeStrict(doc []byte, v any) error {
	j, err := kyaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// shippedRules is the rule file, in the Prometheus Operator's types: a
// PrometheusRule's spec is a rule file's content.
func shippedRules(t *testing.T) monitoringv1.PrometheusRuleSpec {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var spec monitoringv1.PrometheusRuleSpec
	if err := decodeStrict(b, &spec); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return spec
}

// alertNames lists the alerts of a rule file's groups.
func alertNames(spec monitoringv1.PrometheusRuleSpec) []string {
	var names []string
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	return names
}

// The rule file is valid and its unit tests pass, as promtool judges them.
func TestAlertRulesPassPromtool(t *testing.T) {
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		if out, err := promtool(t, nil, args...); err != nil {
			t.Errorf("%v:\n%s", err, out)
		}
	}
}

// ruleTestGroup is the part of a promtool unit test group this test reads.
type ruleTestGroup struct {
	Name        string `json:"name"`
	InputSeries []struct {
		Series string `json:"series"`
		Values string `json:"values"`
	} `json:"input_series"`
	AlertRuleTest []struct {
		Alertname string `json:"alertname"`
		ExpAlerts []struct {
			ExpLabels map[string]string `json:"exp_labels"`
		} `json:"exp_alerts"`
	} `json:"alert_rule_test"`
}

// storyLabel finds the label that tells a unit test's processes apart: the
// instance, or the namespace for the alerts on a namespace's pods.
var storyLabel = regexp.MustCompile(`\b(instance|namespace)="([^"]*)"`)

// Every alert has a unit test group of its name in which it fires, some
// process never fires it, and a process restarts (a stale marker followed
// by the new process's samples).
func TestEveryAlertHasUnitTests(t *testing.T) {
	b, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []ruleTestGroup `json:"tests"`
	}
	if err := kyaml.Unmarshal(b, &tests); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	alerts := alertNames(shippedRules(t))
	if len(alerts) == 0 {
		t.Fatalf("%s has no alerts", rulesFile)
	}
	for _, alert := range alerts {
		i := slices.IndexFunc(tests.Tests, func(g ruleTestGroup) bool { return g.Name == alert })
		if i < 0 {
			t.Errorf("%s: no test group named %s", rulesTestFile, alert)
			continue
		}
		g := tests.Tests[i]
		fires, fired := false, map[string]bool{} // by story label and value
		for _, c := range g.AlertRuleTest {
			if c.Alertname != alert {
				t.Errorf("%s: group %s tests %s", rulesTestFile, alert, c.Alertname)
			}
			for _, a := range c.ExpAlerts {
				fires = true
				for k, v := range a.ExpLabels {
					fired[k+"="+v] = true
				}
			}
		}
		quiet, restarts := false, false
		for _, s := range g.InputSeries {
			if m := storyLabel.FindStringSubmatch(s.Series); m != nil && !fired[m[1]+"="+m[2]] {
				quiet = true
			}
			_, after, ok := strings.Cut(s.Values, "stale ")
			restarts = restarts || ok && strings.TrimSpace(after) != ""
		}
		if !fires || !quiet || !restarts {
			t.Errorf("%s: group %s: fires %t, a process it never fires for %t, a process restarts %t; want all three",
				rulesTestFile, alert, fires, quiet, restarts)
		}
	}
}

// promtool's lint accepts every series a daemon serves once its passes
// have run: passes, requests with an error among them, inserts, the spool,
// and both names of the shard count.
func TestMetricsPassPromtool(t *testing.T) {
	deploytest.ToolPath(t, promtoolTool) // skip before starting anything
	projects := apitest.Generate(3, 2, 31)
	f := apptest.NewFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...),
		apitest.WithFault(projects[0].NFT, apitest.FailFirst(1, apitest.StatusFault(503, "busy"))))
	f.WriteSchedules(t, "fast", "@every 1s", apptest.NamesOf(projects))
	d := f.StartReadsync(t)
	log := d.Log
	base := apptest.ListenerURL(t, log.String)
	var metrics string
	apptest.Eventually(t, "a successful pass and its run record in the metrics", func() bool {
		_, metrics = apptest.Get(t, base, "/metrics")
		return apptest.PassedOK(metrics, "fast") && strings.Contains(metrics, `readsync_inserts_total{outcome="ok",table="sync_runs"}`)
	}, log.String)
	for _, want := range []string{"\nreadsync_shards 1\n", "\nreadsync_shard_count 1\n", "\nreadsync_spool_bytes ", `outcome="http_5xx"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", strings.TrimSpace(want))
		}
	}
	if out, err := promtool(t, strings.NewReader(metrics), "check", "metrics"); err != nil || out != "" {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	apptest.WaitStarted(t, log.String)
	if code := d.Stop(t); code != app.ExitOK {
		t.Errorf("daemon exit %d", code)
	}
}

// promtool's lint is what the test above relies on: it rejects a gauge
// named like a histogram's count.
func TestPromtoolRejectsACountGauge(t *testing.T) {
	const lintFails = "# HELP readsync_x_count A gauge.\n# TYPE readsync_x_count gauge\nreadsync_x_count 1\n"
	out, err := promtool(t, strings.NewReader(lintFails), "check", "metrics")
	if err == nil || !strings.Contains(out, `"_count" suffix`) {
		t.Errorf("promtool check metrics on a gauge named _count: %v\n%s", err, out)
	}
}
