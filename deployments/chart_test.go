package deployments_test

// The Helm chart renders the same pods as the kustomize manifests, from
// values. It is held to the same checks as the kustomize manifests for
// several sets of values, and to the kustomize manifests themselves: the
// two are written by hand (a chart generated from kustomize output would
// lose its values, kustomize generated from the chart its readability), so
// this test is what keeps them one contract.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/readsync/readsync/deployments/deploytest"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// chartSchedules is a schedules file for --set-file.
const chartSchedules = "testdata/schedules.yaml"

func TestChart(t *testing.T) {
	own := deploytest.SecretRef{Name: "readsync-creds", Keys: map[string]string{
		"READSYNC_CLIENT_ID": "id", "READSYNC_CLIENT_SECRET": "secret", "READSYNC_CLICKHOUSE_DSN": "dsn",
	}}
	tests := []struct {
		name     string
		release  string
		flags    []string
		replicas int
		backfill int // indexes; 0 for no Job
		secret   deploytest.SecretRef
		check    func(t *testing.T, m deploytest.Manifests)
	}{
		{name: "defaults", release: "readsync", replicas: 1, secret: deploytest.ExampleSecret},
		{
			name: "scaled, with a backfill", release: "prod",
			flags: []string{"--set", "replicaCount=4", "--set", "backfill.enabled=true", "--set", "backfill.parallelism=5",
				"--set", "podDisruptionBudget.minAvailable=50%"},
			replicas: 4, backfill: 5, secret: deploytest.ExampleSecret,
		},
		{
			name: "own secret, settings, schedules, image, resources, storage", release: "readsync",
			flags: []string{
				"--set", "secret.name=readsync-creds", "--set", "secret.keys.clientID=id",
				"--set", "secret.keys.clientSecret=secret", "--set", "secret.keys.clickhouseDSN=dsn",
				"--set-string", "settings.READSYNC_CONCURRENCY=16", "--set-file", "schedules=" + chartSchedules,
				"--set", "image.tag=v1.2.3", "--set", "resources.limits.memory=1Gi",
				"--set", "persistence.storageClassName=fast", "--set", "persistence.size=5Gi",
				"--set", "backfill.enabled=true", "--set", "backfill.parallelism=1",
				"--set", "backfill.extraArgs={--schedule,hourly}", "--set", "backfill.spool.size=3Gi",
			},
			replicas: 2, backfill: 1, secret: own,
			check: func(t *testing.T, m deploytest.Manifests) {
				s := deploytest.Find[appsv1.StatefulSet](t, m, "readsync")
				c := s.Spec.Template.Spec.Containers[0]
				if c.Image != "registry.example.com/readsync:v1.2.3" {
					t.Errorf("image %q, want the tag from image.tag", c.Image)
				}
				if got := c.Resources.Limits.Memory().String(); got != "1Gi" {
					t.Errorf("memory limit %s, want 1Gi", got)
				}
				vct := s.Spec.VolumeClaimTemplates[0].Spec
				if vct.StorageClassName == nil || *vct.StorageClassName != "fast" || vct.Resources.Requests.Storage().String() != "5Gi" {
					t.Errorf("spool claim %+v, want storage class fast and 5Gi", vct)
				}
				env := deploytest.PodEnv(t, m, "pod readsync-0", deploytest.StatefulSetPod(s, 0), own.Lookup(deploytest.Credentials))
				if env["READSYNC_CONCURRENCY"] != "16" {
					t.Errorf("READSYNC_CONCURRENCY %q, want 16 from settings", env["READSYNC_CONCURRENCY"])
				}
				want, err := os.ReadFile(chartSchedules)
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := os.ReadFile(env["READSYNC_SCHEDULES_FILE"]); strings.TrimSpace(string(got)) != strings.TrimSpace(string(want)) {
					t.Errorf("the schedules ConfigMap holds\n%s\nwant the file given with --set-file:\n%s", got, want)
				}
				j := deploytest.Find[batchv1.Job](t, m, "readsync-backfill")
				if args := j.Spec.Template.Spec.Containers[0].Args; !slices.Equal(args, []string{"--backfill", "--schedule", "hourly"}) {
					t.Errorf("backfill args %q, want --backfill and backfill.extraArgs", args)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags := tt.flags
			if tt.replicas != 1 && !slices.Contains(flags, fmt.Sprintf("replicaCount=%d", tt.replicas)) {
				flags = append(slices.Clone(flags), "--set", fmt.Sprintf("replicaCount=%d", tt.replicas))
			}
			m := deploytest.HelmTemplate(t, tt.release, flags...)
			checkLabels(t, m)
			name := "readsync"
			if tt.release != "readsync" {
				name = tt.release + "-readsync"
			}
			checkDaemon(t, m, name, tt.replicas, tt.secret)
			// The backfill's, not the migration hook's (chart_migrate_test.go).
			jobs := slices.DeleteFunc(deploytest.All[batchv1.Job](m), func(j *batchv1.Job) bool { return j.Annotations["helm.sh/hook"] != "" })
			switch {
			case tt.backfill == 0 && len(jobs) > 0:
				t.Errorf("%s renders a Job with backfill.enabled false", m.What)
			case tt.backfill > 0:
				checkBackfill(t, m, name+"-backfill", tt.backfill, tt.secret)
				claim := deploytest.Find[corev1.PersistentVolumeClaim](t, m, name+"-backfill-spools")
				if claim.Annotations["helm.sh/resource-policy"] != "keep" {
					t.Errorf("claim %s: want helm.sh/resource-policy keep: disabling the backfill must not delete spooled rows", claim.Name)
				}
			}
			for _, s := range deploytest.All[corev1.Secret](m) {
				t.Errorf("%s renders Secret %q: the chart must never hold credentials", m.What, s.Name)
			}
			if tt.check != nil {
				tt.check(t, m)
			}
		})
	}
}

// A backfill in a release of its own renders its Job and claim alone, and
// reads the daemon release's ConfigMaps and Secret by name.
func TestChartBackfillRelease(t *testing.T) {
	daemon := deploytest.HelmTemplate(t, "readsync", "--set", "replicaCount=2")
	b := deploytest.HelmTemplate(t, "readsync-oneoff", "--set", "daemon.enabled=false", "--set", "backfill.enabled=true",
		"--set", "backfill.daemon=readsync", "--set", "backfill.parallelism=2")
	checkLabels(t, b)
	checkBackfillAlone(t, b)
	checkBackfill(t, beside(daemon, b), "readsync-oneoff-backfill", 2, deploytest.ExampleSecret)
	d := deploytest.Find[appsv1.StatefulSet](t, daemon, "readsync").Spec.Template.Spec
	j := deploytest.Find[batchv1.Job](t, b, "readsync-oneoff-backfill").Spec.Template.Spec
	compareSharedPod(t, "chart StatefulSet readsync", &d, "backfill release's Job", &j)
	if _, err := deploytest.HelmRender(t, "readsync-oneoff", "--set", "daemon.enabled=false", "--set", "backfill.enabled=true"); err == nil ||
		!strings.Contains(err.Error(), "backfill.daemon: with daemon.enabled=false") {
		t.Errorf("a backfill release without backfill.daemon: error %v, want one naming backfill.daemon", err)
	}
}

// Values of the wrong type, keys the chart does not know, and settings
// readsync would not read or that the chart sets itself fail helm template
// and helm lint --strict alike, with a message naming the value, rather
// than rendering something else (replicaCount=three rendered replicas: 0).
func TestChartRejectsBadValues(t *testing.T) {
	for _, tt := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--set", "replicaCount=three"}, "replicaCount: Invalid type. Expected: integer, given: string"},
		{[]string{"--set", "replicaCount=-1"}, "replicaCount: Must be greater than or equal to 0"},
		{[]string{"--set", "replicaCont=3"}, "Additional property replicaCont is not allowed"},
		{[]string{"--set", "image.pullPolicy=Sometimes"}, "image.pullPolicy must be one of the following"},
		{[]string{"--set", "image.tag=v1:2"}, "image.tag: Does not match pattern"},
		{[]string{"--set", "metrics.serviceMonitor.enabled=yes please"}, "metrics.serviceMonitor.enabled: Invalid type. Expected: boolean"},
		{[]string{"--set", "metrics.podMonitor.interval=30 s"}, "metrics.podMonitor.interval: Does not match pattern"},
		{[]string{"--set", "metrics.serviceMonitor.labels.release=1"}, "metrics.serviceMonitor.labels.release: Invalid type. Expected: string"},
		{[]string{"--set", "podDisruptionBudget.maxUnavailable=one"}, "podDisruptionBudget.maxUnavailable: Must validate at least one schema"},
		{[]string{"--set", "persistence.size=lots"}, "persistence.size: Does not match pattern"},
		{[]string{"--set", "backfill.enabled=true", "--set", "backfill.parallelism=0"}, "backfill.parallelism: Must be greater than or equal to 1"},
		{[]string{"--set", "backfill.spool.accessModes={ReadWriteSometimes}"}, "backfill.spool.accessModes.0 must be one of the following"},
		{[]string{"--set", "verify.repair=sometimes"}, "verify.repair: Invalid type. Expected: boolean, given: string"},
		{[]string{"--set", "verify.schedule="}, "verify.schedule: String length must be greater than or equal to 1"},
		{[]string{"--set", "verify.resources.limit.memory=1Gi"}, "verify.resources: Additional property limit is not allowed"},
		{[]string{"--set", "settings.LOG_LEVEL=debug"}, "settings: Additional property LOG_LEVEL is not allowed"},
		{[]string{"--set", "settings.READSYNC_CONCURENCY=16"}, "settings: Additional property READSYNC_CONCURENCY is not allowed"},
		{[]string{"--set", "settings.READSYNC_SHARD=0/2"}, "settings: Additional property READSYNC_SHARD is not allowed"},
		{[]string{"--set-string", "settings.READSYNC_CLIENT_SECRET=s3cr3t"}, "settings: Additional property READSYNC_CLIENT_SECRET is not allowed"},
		// A number would reach the ConfigMap as Helm prints it: 1e+06.
		{[]string{"--set", "settings.READSYNC_BATCH_ROWS=1000000"}, "settings.READSYNC_BATCH_ROWS: Invalid type. Expected: string, given: integer"},
	} {
		_, err := deploytest.HelmRender(t, "readsync", tt.flags...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("helm template %q: error %v, want one containing %q", tt.flags, err, tt.want)
		}
		args := append([]string{"lint", "--strict", deploytest.Chart}, tt.flags...)
		if out, err := deploytest.Output(t, deploytest.Helm, "", args...); err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("helm %s: error %v, output\n%s\nwant a failure reporting %q", strings.Join(args, " "), err, out, tt.want)
		}
	}
}

// The schema closes every object of the chart's own: a key it does not
// declare is an error at every level, not only at the top. Objects of
// Kubernetes' or the Prometheus Operator's (affinity, tolerations,
// relabelings, NetworkPolicy rules) are left to the API server, which
// knows them.
func TestChartSchemaIsClosed(t *testing.T) {
	var root map[string]any
	if err := json.Unmarshal([]byte(readRepoFile(t, "deployments/helm/readsync/values.schema.json")), &root); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	if s := root["$schema"]; s != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("values.schema.json: $schema %v, want draft-07, which Helm 3 reads", s)
	}
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["properties"]; ok && v["additionalProperties"] != false {
				t.Errorf("values.schema.json: %s declares properties but admits others (additionalProperties %v)", at, v["additionalProperties"])
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(at+"/"+k, v[k])
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", at, i), e)
			}
		}
	}
	walk("#", root)
}

// settings admits every variable readsync reads, as a string, but those
// the chart sets in the pod itself; the schema lists them, and this test
// holds the list to the binary and to the rendered pod.
func TestChartSettingsSchema(t *testing.T) {
	var schema struct {
		Properties struct {
			Settings struct {
				Properties           map[string]struct{ Type string }
				AdditionalProperties *bool
			}
		}
	}
	if err := json.Unmarshal([]byte(readRepoFile(t, "deployments/helm/readsync/values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	settings := schema.Properties.Settings
	if settings.AdditionalProperties == nil || *settings.AdditionalProperties {
		t.Errorf("values.schema.json: settings admits variables it does not list")
	}
	m := deploytest.HelmTemplate(t, "readsync")
	c := deploytest.Find[appsv1.StatefulSet](t, m, "readsync").Spec.Template.Spec.Containers[0]
	// Tied to the pod's layout, which the chart does not set: Kubernetes
	// mounts the service account token where readsync looks by default.
	setByPod := map[string]bool{"READSYNC_SERVICEACCOUNT_DIR": true}
	for _, e := range c.Env {
		setByPod[e.Name] = true
	}
	var want []string
	for name := range binaryVariables() {
		if strings.HasPrefix(name, "READSYNC_") && !setByPod[name] {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	got := slices.Sorted(maps.Keys(settings.Properties))
	if !slices.Equal(got, want) {
		t.Errorf("values.schema.json: settings admits\n%q\nwant the variables readsync reads but those the chart sets:\n%q", got, want)
	}
	for name, p := range settings.Properties {
		if p.Type != "string" {
			t.Errorf("values.schema.json: settings.%s is of type %q, want string", name, p.Type)
		}
	}
}

func TestChartLint(t *testing.T) {
	for _, flags := range [][]string{nil, {"--set", "backfill.enabled=true", "--set", "replicaCount=3"}} {
		args := append([]string{"lint", "--strict", deploytest.Chart, "--set", "image.repository=" + deploytest.Image}, flags...)
		if _, err := deploytest.Output(t, deploytest.Helm, "", args...); err != nil {
			t.Errorf("helm %s: %v", strings.Join(args, " "), err)
		}
	}
}

// The chart's default release and the kustomize base beside its backfill
// render the same pods: the same environment, probes, ports, security,
// resources, volumes and grace, the same claims, the same workload
// settings, the same grant. Names and labels may differ.
func TestChartMatchesKustomize(t *testing.T) {
	k := beside(deploytest.KustomizeBuild(t, deploytest.Base), deploytest.KustomizeBuild(t, deploytest.Backfill))
	// Without the chart's migration hook, which the base lacks: its pods
	// migrate as the base's do (TestChartMigrationHook checks the hook).
	h := deploytest.HelmTemplate(t, "readsync", "--set", "backfill.enabled=true", "--set", "migrations.hook=false")
	ks, hs := deploytest.Find[appsv1.StatefulSet](t, k, "readsync"), deploytest.Find[appsv1.StatefulSet](t, h, "readsync")
	kj, hj := deploytest.Find[batchv1.Job](t, k, "readsync-backfill"), deploytest.Find[batchv1.Job](t, h, "readsync-backfill")

	compareContract(t, "StatefulSet", statefulSetContract(t, k, ks), statefulSetContract(t, h, hs))
	compareContract(t, "Job", jobContract(t, k, kj), jobContract(t, h, hj))
	for _, name := range []string{"readsync", ks.Spec.ServiceName} {
		compareContract(t, "Service "+name, serviceContract(deploytest.Find[corev1.Service](t, k, name)), serviceContract(deploytest.Find[corev1.Service](t, h, name)))
	}
	kc := deploytest.Find[corev1.PersistentVolumeClaim](t, k, "readsync-backfill-spools").Spec
	hc := deploytest.Find[corev1.PersistentVolumeClaim](t, h, "readsync-backfill-spools").Spec
	compareContract(t, "backfill claim", kc, hc)
	compareContract(t, "Role", deploytest.Find[rbacv1.Role](t, k, "readsync").Rules, deploytest.Find[rbacv1.Role](t, h, "readsync").Rules)
	// The verify CronJob, labels aside (the chart's name its release).
	kv := deploytest.Find[batchv1.CronJob](t, deploytest.KustomizeBuild(t, deploytest.Verify), "readsync-verify").Spec
	hv := deploytest.Find[batchv1.CronJob](t, deploytest.HelmTemplate(t, "readsync", "--set", "verify.enabled=true"), "readsync-verify").Spec
	for _, v := range []*batchv1.CronJobSpec{&kv, &hv} {
		v.JobTemplate.Labels, v.JobTemplate.Spec.Template.Labels = nil, nil
	}
	compareContract(t, "verify CronJob", kv, hv)
	kb, hb := deploytest.Find[policyv1.PodDisruptionBudget](t, k, "readsync").Spec, deploytest.Find[policyv1.PodDisruptionBudget](t, h, "readsync").Spec
	kb.Selector, hb.Selector = nil, nil // the chart's selects its release too; checkDisruptionBudget checks both
	compareContract(t, "PodDisruptionBudget", kb, hb)
}

func statefulSetContract(t *testing.T, m deploytest.Manifests, s *appsv1.StatefulSet) map[string]any {
	t.Helper()
	spec := s.Spec.DeepCopy()
	var claims []corev1.PersistentVolumeClaimSpec
	for _, c := range spec.VolumeClaimTemplates {
		claims = append(claims, c.Spec)
	}
	return map[string]any{
		"replicas": spec.Replicas, "podManagementPolicy": spec.PodManagementPolicy, "updateStrategy": spec.UpdateStrategy,
		"volumeClaimTemplates": claims, "pod 0": podContract(t, m, deploytest.StatefulSetPod(s, 0)),
	}
}

func jobContract(t *testing.T, m deploytest.Manifests, j *batchv1.Job) map[string]any {
	t.Helper()
	spec := j.Spec
	return map[string]any{
		"completionMode": spec.CompletionMode, "parallelism": spec.Parallelism, "completions": spec.Completions,
		"backoffLimit": spec.BackoffLimit, "index 0": podContract(t, m, deploytest.IndexedJobPod(j, 0)),
		"index 2": podContract(t, m, deploytest.IndexedJobPod(j, 2))["environment"],
	}
}

// podContract is a pod with its environment resolved and the names of
// the objects it refers to left out.
func podContract(t *testing.T, m deploytest.Manifests, p deploytest.Pod) map[string]any {
	t.Helper()
	env := deploytest.PodEnv(t, m, m.What+" pod "+p.Name, p, deploytest.ExampleSecret.Lookup(deploytest.Credentials))
	schedules, err := os.ReadFile(env["READSYNC_SCHEDULES_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	env["READSYNC_SCHEDULES_FILE"] = filepath.Base(env["READSYNC_SCHEDULES_FILE"])
	delete(env, "POD_NAME") // the pod's own name, release-dependent
	spec := p.Spec.DeepCopy()
	c := &spec.Containers[0]
	var secrets []corev1.EnvVar
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secrets = append(secrets, e)
		}
	}
	c.Env, c.EnvFrom = nil, nil
	for i := range spec.Volumes {
		v := &spec.Volumes[i].VolumeSource
		if v.ConfigMap != nil {
			v.ConfigMap.Name = ""
		}
		if v.PersistentVolumeClaim != nil {
			v.PersistentVolumeClaim.ClaimName = ""
		}
	}
	spec.ServiceAccountName = ""
	return map[string]any{"spec": spec, "environment": env, "secret references": secrets, "schedules": string(schedules)}
}

func serviceContract(s *corev1.Service) map[string]any {
	return map[string]any{
		"clusterIP": s.Spec.ClusterIP, "ports": s.Spec.Ports, "publishNotReadyAddresses": s.Spec.PublishNotReadyAddresses,
		"selects component": s.Spec.Selector["app.kubernetes.io/component"],
	}
}

// compareContract reports every path at which the kustomize and the chart
// versions of something differ.
func compareContract(t *testing.T, what string, kustomize, chart any) {
	t.Helper()
	var k, h any
	for _, p := range []struct {
		v   any
		out *any
	}{{kustomize, &k}, {chart, &h}} {
		b, err := json.Marshal(p.v)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, p.out); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range diffJSON(what, k, h) {
		t.Errorf("kustomize and the chart differ: %s", d)
	}
}

func diffJSON(at string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			out = append(out, diffJSON(at+"."+k, am[k], bm[k])...)
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, diffJSON(fmt.Sprintf("%s[%d]", at, i), al[i], bl[i])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return []string{fmt.Sprintf("%s: kustomize %s, chart %s", at, ab, bb)}
}

// The NetworkPolicy covers the release's pods, the daemon's and the
// backfill's, and no other release's; it opens the port readsync listens
// on, to the peers given, and limits egress only when told where to.
func TestChartNetworkPolicy(t *testing.T) {
	const peer = "monitoring"
	for _, tt := range []struct {
		name   string
		flags  []string
		egress int // rules; 0 for no egress policy
	}{
		{name: "ingress only", flags: []string{"--set", "networkPolicy.enabled=true"}},
		{name: "ingress from Prometheus, egress to DNS", egress: 1, flags: []string{
			"--set", "networkPolicy.enabled=true",
			"--set", "networkPolicy.ingressFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=" + peer,
			"--set", "networkPolicy.egress[0].ports[0].port=53", "--set", "networkPolicy.egress[0].ports[0].protocol=UDP",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := deploytest.HelmTemplate(t, "readsync", append(slices.Clone(tt.flags), "--set", "backfill.enabled=true")...)
			other := deploytest.HelmTemplate(t, "other", "--set", "backfill.enabled=true")
			p := one[networkingv1.NetworkPolicy](t, m)
			sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
			if err != nil || sel.Empty() {
				t.Fatalf("NetworkPolicy %s: podSelector %+v: %v", p.Name, p.Spec.PodSelector, err)
			}
			s := deploytest.Find[appsv1.StatefulSet](t, m, "readsync")
			j := deploytest.Find[batchv1.Job](t, m, "readsync-backfill")
			for what, l := range map[string]map[string]string{
				"the daemon's pods": deploytest.StatefulSetPod(s, 0).Labels, "the backfill's pods": deploytest.IndexedJobPod(j, 0).Labels,
			} {
				if !sel.Matches(labels.Set(l)) {
					t.Errorf("NetworkPolicy %s does not select %s (%v)", p.Name, what, l)
				}
			}
			if sel.Matches(labels.Set(deploytest.StatefulSetPod(deploytest.Find[appsv1.StatefulSet](t, other, "other-readsync"), 0).Labels)) {
				t.Errorf("NetworkPolicy %s selects the pods of another release", p.Name)
			}

			if len(p.Spec.Ingress) != 1 || len(p.Spec.Ingress[0].Ports) != 1 || p.Spec.Ingress[0].Ports[0].Port == nil {
				t.Fatalf("NetworkPolicy %s: ingress %+v, want one rule of one port", p.Name, p.Spec.Ingress)
			}
			cfg, c := checkPod(t, m, "pod readsync-0", deploytest.StatefulSetPod(s, 0), deploytest.ExampleSecret)
			_, listen, _ := strings.Cut(cfg.HTTPAddr, ":")
			if port := *p.Spec.Ingress[0].Ports[0].Port; containerPort(c, port) != listen {
				t.Errorf("NetworkPolicy %s opens port %s, readsync listens on %s", p.Name, port.String(), listen)
			}
			from := p.Spec.Ingress[0].From
			if tt.egress > 0 && (len(from) != 1 || from[0].NamespaceSelector == nil || from[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != peer) {
				t.Errorf("NetworkPolicy %s: ingress from %+v, want networkPolicy.ingressFrom", p.Name, from)
			}
			if tt.egress == 0 && len(from) != 0 {
				t.Errorf("NetworkPolicy %s: ingress from %+v, want anyone", p.Name, from)
			}
			wantTypes := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
			if tt.egress > 0 {
				wantTypes = append(wantTypes, networkingv1.PolicyTypeEgress)
			}
			if !slices.Equal(p.Spec.PolicyTypes, wantTypes) || len(p.Spec.Egress) != tt.egress {
				t.Errorf("NetworkPolicy %s: policyTypes %v with %d egress rules, want %v with %d: egress is limited only when rules are given",
					p.Name, p.Spec.PolicyTypes, len(p.Spec.Egress), wantTypes, tt.egress)
			}
			if tt.egress > 0 {
				if e := p.Spec.Egress[0].Ports; len(e) != 1 || e[0].Port == nil || *e[0].Port != intstr.FromInt32(53) {
					t.Errorf("NetworkPolicy %s: egress %+v, want networkPolicy.egress", p.Name, p.Spec.Egress)
				}
			}
		})
	}
}

// The values table of the chart's README lists every value of the schema,
// and nothing else: settings as one value, whose variables the README's
// Configuration table describes.
func TestChartReadmeValues(t *testing.T) {
	var root map[string]any
	if err := json.Unmarshal([]byte(readRepoFile(t, "deployments/helm/readsync/values.schema.json")), &root); err != nil {
		t.Fatal(err)
	}
	defs, _ := root["definitions"].(map[string]any)
	var want []string
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		if ref, ok := node["$ref"].(string); ok {
			node, _ = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		}
		props, ok := node["properties"].(map[string]any)
		if !ok || path == "settings" {
			want = append(want, path)
			return
		}
		for k, v := range props {
			if p := strings.TrimPrefix(path+"."+k, "."); p != "global" { // Helm's, for subcharts
				walk(p, v.(map[string]any))
			}
		}
	}
	walk("", root)
	slices.Sort(want)

	readme := readRepoFile(t, "deployments/helm/readsync/README.md")
	_, table, ok := strings.Cut(readme, "\n| value | meaning | default |\n")
	if !ok {
		t.Fatal("deployments/helm/readsync/README.md: no table of values")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var got []string
	for _, row := range strings.Split(table, "\n")[1:] { // after the separator row
		first := strings.Split(row, "|")[1]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			got = append(got, m[1])
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("deployments/helm/readsync/README.md lists the values\n%q\nvalues.schema.json has\n%q", got, want)
	}
}

// namesVolume mounts a volume of files of names, read-only and beside the
// schedules' read-only mount, in the daemon's pods and the backfill's,
// which read the schedules' nft_names_file from it; without it neither has
// one.
func TestChartMountsANamesVolume(t *testing.T) {
	for _, set := range []bool{true, false} {
		flags := []string{"--set", "backfill.enabled=true"}
		if set {
			flags = append(flags, "--set", "namesVolume.configMap.name=readsync-names")
		}
		m := deploytest.HelmTemplate(t, "readsync", flags...)
		specs := map[string]corev1.PodSpec{
			"StatefulSet": one[appsv1.StatefulSet](t, m).Spec.Template.Spec,
			"Job":         deploytest.Find[batchv1.Job](t, m, "readsync-backfill").Spec.Template.Spec,
		}
		for kind, spec := range specs {
			var vol *corev1.Volume
			for i := range spec.Volumes {
				if spec.Volumes[i].Name == "names" {
					vol = &spec.Volumes[i]
				}
			}
			var mount *corev1.VolumeMount
			for _, c := range spec.Containers {
				for i := range c.VolumeMounts {
					if c.VolumeMounts[i].Name == "names" {
						mount = &c.VolumeMounts[i]
					}
				}
			}
			switch {
			case !set && (vol != nil || mount != nil):
				t.Errorf("%s: a names volume without namesVolume", kind)
			case set && (vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != "readsync-names"):
				t.Errorf("%s: volume names %+v, want the ConfigMap readsync-names", kind, vol)
			case set && (mount == nil || mount.MountPath != "/etc/readsync-names" || !mount.ReadOnly):
				t.Errorf("%s: mount %+v, want /etc/readsync-names, read-only", kind, mount)
			}
		}
	}
}
