package deployments_test

import (
	"fmt"
	"net"
	"reflect"
	"regexp"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/readsync/readsync/deployments/deploytest"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// k8sMonitoring is the README's overlay: the base and the monitoring
// component.
const k8sMonitoring = "testdata/k8s-monitoring"

// jobSelector finds the job a rule's expression selects.
var jobSelector = regexp.MustCompile(`\bjob="([^"]*)"`)

// The monitoring component adds to the base a PrometheusRule holding the
// rule file's groups, and a PodMonitor that scrapes /metrics on the
// daemon's port of each daemon pod, under the job the rules select; the
// base's objects stay as they were.
func TestManifestMonitoring(t *testing.T) {
	m := deploytest.KustomizeBuild(t, k8sMonitoring)
	checkDaemon(t, m, "readsync", 1, deploytest.ExampleSecret)

	rule := deploytest.Find[monitoringv1.PrometheusRule](t, m, "readsync")
	shipped := shippedRules(t)
	if !reflect.DeepEqual(rule.Spec, shipped) {
		t.Errorf("PrometheusRule readsync differs from %s; run `make manifests`, which generates "+
			"it from that file (kustomize reads no file outside the component's directory): %s", rulesFile, firstDifference(rule.Spec, shipped))
	}

	pm := deploytest.Find[monitoringv1.PodMonitor](t, m, "readsync")
	set := deploytest.Find[appsv1.StatefulSet](t, m, "readsync")
	pod := deploytest.StatefulSetPod(set, 0)
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil {
		t.Fatalf("PodMonitor readsync: selector: %v", err)
	}
	if !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("PodMonitor readsync selects %s, which the daemon's pods (%v) do not match", sel, pod.Labels)
	}
	// The backfill's pods serve no metrics: a target that is never up.
	for _, j := range deploytest.All[batchv1.Job](deploytest.KustomizeBuild(t, deploytest.Backfill)) {
		if p := deploytest.IndexedJobPod(j, 0); sel.Matches(labels.Set(p.Labels)) {
			t.Errorf("PodMonitor readsync selects the pods of Job %s", j.Name)
		}
	}

	cfg, c := checkPod(t, m, "StatefulSet readsync", pod, deploytest.ExampleSecret)
	_, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil {
		t.Fatalf("READSYNC_HTTP_ADDR %q: %v", cfg.HTTPAddr, err)
	}
	if eps := pm.Spec.PodMetricsEndpoints; len(eps) != 1 || eps[0].Port == nil ||
		containerPort(c, intstr.FromString(*eps[0].Port)) != port || eps[0].Path != "/metrics" {
		t.Errorf("PodMonitor readsync scrapes %s, want one endpoint: the port READSYNC_HTTP_ADDR listens on (%s), path /metrics", jsonOf(eps), port)
	}

	job, selectors := pod.Labels[pm.Spec.JobLabel], 0
	for _, g := range shipped.Groups {
		for _, r := range g.Rules {
			for _, sel := range jobSelector.FindAllStringSubmatch(r.Expr.String(), -1) {
				selectors++
				if sel[1] != job {
					t.Errorf("alert %s selects job=%q, but the PodMonitor's job is %q (the pods' %q)", r.Alert, sel[1], job, pm.Spec.JobLabel)
				}
			}
		}
	}
	if selectors == 0 {
		t.Errorf("no alert of %s selects a job: this test no longer checks the PodMonitor's", rulesFile)
	}
}

// firstDifference says where two rule files' groups first differ.
func firstDifference(got, want monitoringv1.PrometheusRuleSpec) string {
	if len(got.Groups) != len(want.Groups) {
		return fmt.Sprintf("%d groups, want %d", len(got.Groups), len(want.Groups))
	}
	for i, g := range got.Groups {
		w := want.Groups[i]
		if len(g.Rules) != len(w.Rules) {
			return fmt.Sprintf("group %s has %d rules, want %d", g.Name, len(g.Rules), len(w.Rules))
		}
		for j, r := range g.Rules {
			if !reflect.DeepEqual(r, w.Rules[j]) {
				return fmt.Sprintf("group %s, rule %d:\n%s\nwant:\n%s", g.Name, j+1, jsonOf(r), jsonOf(w.Rules[j]))
			}
		}
		g.Rules, w.Rules = nil, nil
		if !reflect.DeepEqual(g, w) {
			return fmt.Sprintf("group %d:\n%s\nwant:\n%s", i+1, jsonOf(g), jsonOf(w))
		}
	}
	return "the specs differ outside their groups"
}
