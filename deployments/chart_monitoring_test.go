package deployments_test

// The chart's optional objects for the Prometheus Operator and Grafana:
// monitors that scrape the daemon's pods on the port readsync listens on,
// with the job the alerts read; the alerts and the dashboard as the
// repository ships them.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/readsync/readsync/deployments/deploytest"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	kyaml "sigs.k8s.io/yaml"
)

// dashboardFile is the repository's dashboard, of which the chart holds a
// copy (helm reads no file outside the chart), as it does of rulesFile;
// `make manifests` generates both copies (TestGeneratedFilesUpToDate).
const dashboardFile = "grafana/readsync.json"

// chartEverything enables every optional object of the chart.
var chartEverything = []string{
	"--set", "backfill.enabled=true",
	"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.podMonitor.enabled=true",
	"--set", "prometheusRule.enabled=true", "--set", "grafanaDashboard.enabled=true",
	"--set", "networkPolicy.enabled=true", "--set", "verify.enabled=true",
}

// The rule file loads in Prometheus as it is: promtool checks its PromQL,
// durations, labels and annotation templates as Prometheus does when it
// reads rule_files.
func TestPrometheusRulesCheck(t *testing.T) {
	out, err := deploytest.Output(t, promtoolTool, "", "check", "rules", rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	groups := ruleGroups(t)
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(groups[0].Rules)); !strings.Contains(string(out), want) {
		t.Errorf("promtool check rules %s: %s, want %q", rulesFile, out, want)
	}
}

// Off by default: the monitoring objects need the Prometheus Operator's
// CRDs, which a cluster may lack, and the dashboard a Grafana sidecar.
func TestChartMonitoringOffByDefault(t *testing.T) {
	m := deploytest.HelmTemplate(t, "readsync")
	for _, o := range m.Objs {
		switch o.(type) {
		case *monitoringv1.ServiceMonitor, *monitoringv1.PodMonitor, *monitoringv1.PrometheusRule:
			t.Errorf("%s renders %T %s by default", m.What, o, o.GetName())
		}
	}
	for _, cm := range deploytest.All[corev1.ConfigMap](m) {
		if _, ok := cm.Data["readsync.json"]; ok {
			t.Errorf("%s renders the dashboard ConfigMap %s by default", m.What, cm.Name)
		}
	}
}

// With every optional object, the chart renders one of each, and each
// does its job: the monitors scrape /metrics of the daemon's pods only,
// on the port readsync listens on, as the job the alerts read; the rules
// are the rule file's; the dashboard is the repository's, labelled for
// the sidecar.
func TestChartMonitoring(t *testing.T) {
	m := deploytest.HelmTemplate(t, "prod", append(slices.Clone(chartEverything), "--set", "replicaCount=3",
		"--set", "metrics.serviceMonitor.interval=30s", "--set", "metrics.serviceMonitor.labels.release=monitoring",
		"--set", "grafanaDashboard.folder=readsync", "--set", "grafanaDashboard.namespace=grafana")...)
	checkLabels(t, m)
	s := deploytest.Find[appsv1.StatefulSet](t, m, "prod-readsync")
	checkDaemon(t, m, s.Name, 3, deploytest.ExampleSecret)
	jobs := map[string]string{} // monitor → the job it gives the series

	sm := one[monitoringv1.ServiceMonitor](t, m)
	if sm.Labels["release"] != "monitoring" {
		t.Errorf("ServiceMonitor %s: labels %v, want metrics.serviceMonitor.labels among them", sm.Name, sm.Labels)
	}
	svc := selectedService(t, m, sm)
	if svc != nil {
		checkSelectsDaemon(t, m, "ServiceMonitor "+sm.Name+"'s Service "+svc.Name, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, s)
		if len(sm.Spec.Endpoints) != 1 {
			t.Fatalf("ServiceMonitor %s: %d endpoints, want 1", sm.Name, len(sm.Spec.Endpoints))
		}
		e := sm.Spec.Endpoints[0]
		i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port })
		if i < 0 {
			t.Errorf("ServiceMonitor %s scrapes port %q, which Service %s lacks", sm.Name, e.Port, svc.Name)
		} else {
			checkMetricsPort(t, m, "ServiceMonitor "+sm.Name, s, svc.Spec.Ports[i].TargetPort.String(), e.Path)
		}
		if e.Interval != "30s" {
			t.Errorf("ServiceMonitor %s: interval %v, want 30s from metrics.serviceMonitor.interval", sm.Name, e.Interval)
		}
		jobs["ServiceMonitor "+sm.Name] = jobOf(sm.Spec.JobLabel, svc.Labels, svc.Name)
	}

	pm := one[monitoringv1.PodMonitor](t, m)
	checkSelectsDaemon(t, m, "PodMonitor "+pm.Name, &pm.Spec.Selector, s)
	if len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port == nil {
		t.Fatalf("PodMonitor %s: endpoints %+v, want one, by port name", pm.Name, pm.Spec.PodMetricsEndpoints)
	}
	e := pm.Spec.PodMetricsEndpoints[0]
	checkMetricsPort(t, m, "PodMonitor "+pm.Name, s, *e.Port, e.Path)
	jobs["PodMonitor "+pm.Name] = jobOf(pm.Spec.JobLabel, s.Spec.Template.Labels, pm.Namespace+"/"+pm.Name)

	rule := one[monitoringv1.PrometheusRule](t, m)
	groups := ruleGroups(t)
	if !reflect.DeepEqual(rule.Spec.Groups, groups) {
		t.Errorf("PrometheusRule %s holds\n%s\nwant the groups of %s:\n%s", rule.Name, jsonOf(rule.Spec.Groups), rulesFile, jsonOf(groups))
	}
	// Every job an alert selects is the one each monitor gives the pods'
	// series, whatever the release's name.
	for _, g := range groups {
		for _, r := range g.Rules {
			for _, match := range regexp.MustCompile(`\bjob\s*=\s*"([^"]*)"`).FindAllStringSubmatch(r.Expr.String(), -1) {
				for monitor, job := range jobs {
					if job != match[1] {
						t.Errorf("%s: alert %s selects job %q; %s gives the daemon's series job %q", rulesFile, r.Alert, match[1], monitor, job)
					}
				}
			}
		}
	}

	checkDashboard(t, m)
}

// one returns the only object of type T.
func one[T any, PT interface {
	*T
	deploytest.Object
}](t *testing.T, m deploytest.Manifests) PT {
	t.Helper()
	objs := deploytest.All[T, PT](m)
	if len(objs) != 1 {
		t.Fatalf("%s renders %d %T, want 1", m.What, len(objs), PT(nil))
	}
	return objs[0]
}

// selectedService returns the one Service of the release that a
// ServiceMonitor selects: two would scrape each pod twice.
func selectedService(t *testing.T, m deploytest.Manifests, sm *monitoringv1.ServiceMonitor) *corev1.Service {
	t.Helper()
	if ns := sm.Spec.NamespaceSelector; ns.Any || len(ns.MatchNames) > 0 {
		t.Errorf("ServiceMonitor %s: namespaceSelector %+v, want its own namespace, the release's", sm.Name, ns)
	}
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Errorf("ServiceMonitor %s: selector %+v: %v", sm.Name, sm.Spec.Selector, err)
		return nil
	}
	var selected []*corev1.Service
	for _, svc := range deploytest.All[corev1.Service](m) {
		if sel.Matches(labels.Set(svc.Labels)) {
			selected = append(selected, svc)
		}
	}
	if len(selected) != 1 {
		var names []string
		for _, svc := range selected {
			names = append(names, svc.Name)
		}
		t.Errorf("ServiceMonitor %s selects Services %q, want one: each would scrape every pod", sm.Name, names)
		return nil
	}
	return selected[0]
}

// checkSelectsDaemon checks that a selector takes the StatefulSet's pods
// and no backfill's, which have no metrics port.
func checkSelectsDaemon(t *testing.T, m deploytest.Manifests, what string, selector *metav1.LabelSelector, s *appsv1.StatefulSet) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil || sel.Empty() {
		t.Errorf("%s: selector %+v: %v", what, selector, err)
		return
	}
	if !sel.Matches(labels.Set(deploytest.StatefulSetPod(s, 0).Labels)) {
		t.Errorf("%s: selector %s does not select the pods of StatefulSet %s (%v)", what, sel, s.Name, s.Spec.Template.Labels)
	}
	for _, j := range deploytest.All[batchv1.Job](m) {
		if sel.Matches(labels.Set(deploytest.IndexedJobPod(j, 0).Labels)) {
			t.Errorf("%s: selector %s selects the pods of Job %s", what, sel, j.Name)
		}
	}
}

// checkMetricsPort checks that a scrape reaches readsync's /metrics: the
// container port it names is the one READSYNC_HTTP_ADDR listens on.
func checkMetricsPort(t *testing.T, m deploytest.Manifests, what string, s *appsv1.StatefulSet, port, path string) {
	t.Helper()
	p := deploytest.StatefulSetPod(s, 0)
	cfg, c := checkPod(t, m, what+"'s pod "+p.Name, p, deploytest.ExampleSecret)
	_, listen, _ := strings.Cut(cfg.HTTPAddr, ":")
	if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == port }) {
		t.Errorf("%s scrapes port %q, which container %s does not name", what, port, c.Name)
	}
	if got := containerPort(c, intstr.Parse(port)); got != listen {
		t.Errorf("%s scrapes port %s (%s), readsync listens on %s (READSYNC_HTTP_ADDR %s)", what, port, got, listen, cfg.HTTPAddr)
	}
	if path != "/metrics" {
		t.Errorf("%s scrapes path %q, want /metrics", what, path)
	}
}

// jobOf is the job label a monitor gives the series it scrapes: the value
// of its jobLabel on the scraped object, else the fallback.
func jobOf(jobLabel string, objLabels map[string]string, fallback string) string {
	if v, ok := objLabels[jobLabel]; jobLabel != "" && ok {
		return v
	}
	return fallback
}

// ruleGroups decodes the repository's rule file as the Prometheus
// Operator's types, strictly: a PrometheusRule holds the same groups.
func ruleGroups(t *testing.T) []monitoringv1.RuleGroup {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	j, err := kyaml.YAMLToJSONStrict(b)
	if err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var file struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	strict, err := kjson.UnmarshalStrict(j, &file)
	if err != nil || len(strict) > 0 {
		t.Fatalf("%s: not a rule file: %v %v", rulesFile, err, strict)
	}
	if len(file.Groups) != 1 || file.Groups[0].Name != "readsync" || len(file.Groups[0].Rules) == 0 {
		t.Fatalf("%s: want one group readsync with rules, got %s", rulesFile, jsonOf(file.Groups))
	}
	return file.Groups
}

// checkDashboard checks the dashboard ConfigMaps: the repository's
// dashboards, byte for byte, one a ConfigMap, labelled and annotated for
// Grafana's sidecar.
func checkDashboard(t *testing.T, m deploytest.Manifests) {
	t.Helper()
	var dashboards []*corev1.ConfigMap
	for _, cm := range deploytest.All[corev1.ConfigMap](m) {
		if cm.Labels["grafana_dashboard"] == "1" {
			dashboards = append(dashboards, cm)
		}
	}
	files := []string{dashboardFile, operationsDashboardFile}
	if len(dashboards) != len(files) {
		t.Fatalf("%s: %d ConfigMaps labelled grafana_dashboard: \"1\", want %d", m.What, len(dashboards), len(files))
	}
	for _, file := range files {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		key := filepath.Base(file)
		i := slices.IndexFunc(dashboards, func(cm *corev1.ConfigMap) bool { _, ok := cm.Data[key]; return ok })
		if i < 0 {
			t.Errorf("%s: no dashboard ConfigMap holds %s", m.What, key)
			continue
		}
		cm := dashboards[i]
		if got := cm.Data[key]; got != string(want) || len(cm.Data) != 1 {
			t.Errorf("ConfigMap %s: %s is not %s byte for byte (%d bytes, want %d), or not alone", cm.Name, key, file, len(got), len(want))
		}
		if !json.Valid([]byte(cm.Data[key])) {
			t.Errorf("ConfigMap %s: %s is not JSON", cm.Name, key)
		}
		if cm.Annotations["grafana_folder"] != "readsync" || cm.Namespace != "grafana" {
			t.Errorf("ConfigMap %s in namespace %q, annotations %v: want grafanaDashboard.namespace and .folder", cm.Name, cm.Namespace, cm.Annotations)
		}
	}
}

// The CRDs in testdata are those of the Prometheus Operator release whose
// Go types the tests decode with: bump the module, copy its CRDs.
func TestCRDsMatchTheirTypes(t *testing.T) {
	const module = "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring"
	req := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + ` v(\S+)`).FindStringSubmatch(readRepoFile(t, "go.mod"))
	if req == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	version := req[1]
	files, err := filepath.Glob(filepath.Join(deploytest.CRDs, "*.yaml"))
	if err != nil || len(files) != 3 {
		t.Fatalf("%s: want the CRDs of ServiceMonitor, PodMonitor and PrometheusRule, got %q (%v)", deploytest.CRDs, files, err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd metav1.PartialObjectMetadata
		if err := kyaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if v := crd.Annotations["operator.prometheus.io/version"]; v != version {
			t.Errorf("%s is of the Prometheus Operator %s, the Go types of %s: copy example/prometheus-operator-crd of that release", file, v, version)
		}
	}
}
