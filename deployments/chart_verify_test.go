package deployments_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/deployments/deploytest"
	"github.com/readsync/readsync/internal/app"
	"github.com/readsync/readsync/internal/apptest"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// verifyCronJobPod is the pod a run of the CronJob starts.
func verifyCronJobPod(c *batchv1.CronJob) deploytest.Pod {
	tmpl := c.Spec.JobTemplate.Spec.Template
	return deploytest.Pod{Name: c.Name + "-29000000-x7k2q", Labels: maps.Clone(tmpl.Labels), Annotations: maps.Clone(tmpl.Annotations),
		Spec: *tmpl.Spec.DeepCopy()}
}

// verify.enabled renders a CronJob whose pod is the daemon's but for its
// arguments (--verify and the window, --repair when asked), runs one Job
// at a time, does not retry a failure, and is selected by no Service and
// no disruption budget of the daemon.
func TestChartVerifyCronJob(t *testing.T) {
	if n := len(deploytest.All[batchv1.CronJob](deploytest.HelmTemplate(t, "readsync"))); n != 0 {
		t.Errorf("the chart's defaults render %d CronJobs; verify.enabled is false by default", n)
	}
	for _, tt := range []struct {
		name  string
		flags []string
		args  []string
	}{
		{"defaults", nil, []string{"--verify", "--since", "48h"}},
		{"the whole history, repaired", []string{"--set", "verify.since=", "--set", "verify.repair=true", "--set", "verify.timeZone=Etc/UTC",
			"--set", "verify.schedule=0 4 * * 0", "--set", "verify.resources.limits.memory=2Gi"}, []string{"--verify", "--repair"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := deploytest.HelmTemplate(t, "readsync", append([]string{"--set", "verify.enabled=true", "--set", "replicaCount=2"}, tt.flags...)...)
			checkLabels(t, m)
			c := deploytest.Find[batchv1.CronJob](t, m, "readsync-verify")
			p := verifyCronJobPod(c)
			if got := p.Spec.Containers[0].Args; !slices.Equal(got, tt.args) {
				t.Errorf("the verify pod's args are %q, want %q", got, tt.args)
			}
			if c.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
				t.Errorf("concurrencyPolicy %q: a verify that outlasts its interval would run twice at once", c.Spec.ConcurrencyPolicy)
			}
			if c.Spec.StartingDeadlineSeconds == nil {
				t.Error("no startingDeadlineSeconds: a controller down for long would start a run of every schedule it missed (up to 100)")
			}
			if b := c.Spec.JobTemplate.Spec.BackoffLimit; b == nil || *b != 0 {
				t.Errorf("backoffLimit %v, want 0: a difference found is not transient, a retry would only print it again", b)
			}
			if p.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("restartPolicy %q, want Never", p.Spec.RestartPolicy)
			}
			if a := p.Spec.AutomountServiceAccountToken; a == nil || *a {
				t.Error("the verify pod mounts a service account token; --verify never calls the Kubernetes API")
			}
			if !strings.Contains(strings.Join(tt.flags, " "), "resources") {
				// The rest of the pod is the daemon's: image, settings,
				// credentials, security, schedules; but no spool, which
				// --verify never writes.
				d := deploytest.Find[appsv1.StatefulSet](t, m, "readsync").Spec.Template.Spec
				d.Containers[0].VolumeMounts = slices.DeleteFunc(d.Containers[0].VolumeMounts, func(v corev1.VolumeMount) bool { return v.Name == "spool" })
				compareSharedPod(t, "chart StatefulSet readsync", &d, "CronJob readsync-verify", &p.Spec)
			} else if got := p.Spec.Containers[0].Resources.Limits.Memory().String(); got != "2Gi" {
				t.Errorf("verify.resources: the verify container's memory limit is %s, want 2Gi", got)
			}
			podLabels := labels.Set(p.Labels)
			for _, s := range deploytest.All[corev1.Service](m) {
				if labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
					t.Errorf("Service %s selects the verify pod: it serves nothing", s.Name)
				}
			}
			for _, b := range deploytest.All[policyv1.PodDisruptionBudget](m) {
				if sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector); err == nil && sel.Matches(podLabels) {
					t.Errorf("PodDisruptionBudget %s selects the verify pod: it would count against the daemon's budget", b.Name)
				}
			}
		})
	}
}

// The CronJob's pod, run with its own arguments and environment against a
// database the daemon wrote, exits 0 when every view is right and 1 when
// one differs, which makes its Job fail; with verify.repair it mends the
// difference and exits 0.
func TestChartVerifyPodRuns(t *testing.T) {
	projects := apitest.Generate(3, 4, 41)
	f := apptest.NewFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...), apitest.WithReadGrowth(2))
	for range 2 {
		if code, _, stderr := runIn(t, f, "--backfill"); code != app.ExitOK {
			t.Fatalf("backfill: exit %d\n%s", code, stderr)
		}
	}
	// The pod's exit code and standard output.
	runVerifyPod := func(t *testing.T, flags ...string) (int, string) {
		t.Helper()
		m := deploytest.HelmTemplate(t, "readsync", append([]string{"--set", "verify.enabled=true"}, flags...)...)
		p := verifyCronJobPod(deploytest.Find[batchv1.CronJob](t, m, "readsync-verify"))
		env := deploytest.PodEnv(t, m, "CronJob readsync-verify's pod", p, deploytest.ExampleSecret.Lookup(deploytest.Credentials))
		env["READSYNC_CLICKHOUSE_DSN"] = f.DB.DSN // the Secret's, in the cluster
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), p.Spec.Containers[0].Args, env, &stdout, &stderr)
		if strings.Contains(stdout.String()+stderr.String(), deploytest.Credentials["READSYNC_CLIENT_SECRET"]) {
			t.Error("the verify pod's output leaks the client secret")
		}
		return code, stdout.String()
	}
	const clean = "verify: ok: 12 views equal their brute force\n"
	if code, out := runVerifyPod(t); code != app.ExitOK || !strings.HasSuffix(out, clean) {
		t.Fatalf("the verify pod on a database the daemon wrote: exit %d, want 0 and %q:\n%s", code, clean, out)
	}

	// A project's day row, gone from the day rollup.
	p := projects[0].ID
	f.DeleteRows(t, "project_read_day_rollup", fmt.Sprintf("project_id = %d", p))
	if code, out := runVerifyPod(t); code != app.ExitFailed || !strings.Contains(out, fmt.Sprintf("  missing project_id=%d day=", p)) {
		t.Errorf("the verify pod after a day row went missing: exit %d, want %d naming project %d:\n%s", code, app.ExitFailed, p, out)
	}
	if code, out := runVerifyPod(t, "--set", "verify.repair=true"); code != app.ExitOK || !strings.HasSuffix(out, clean) {
		t.Errorf("the verify pod with verify.repair: exit %d, want 0 and %q:\n%s", code, clean, out)
	}
	if code, out := runVerifyPod(t, "--set", "verify.since="); code != app.ExitOK {
		t.Errorf("the verify pod over the whole history after the repair: exit %d:\n%s", code, out)
	}
}

// The README's and the chart README's `helm install` commands render, and
// render what they promise: the daemon with the replicas asked for, and
// each optional object they enable.
func TestReadmeHelmInstalls(t *testing.T) {
	const install = "helm install readsync deployments/helm/readsync"
	for _, doc := range []string{"README.md", "deployments/helm/readsync/README.md"} {
		_, command, ok := strings.Cut(readRepoFile(t, doc), install)
		if !ok {
			t.Errorf("%s: no `%s` command", doc, install)
			continue
		}
		// The command's lines, joined where they end in a backslash.
		var flags []string
		for line := range strings.Lines(command) {
			line = strings.TrimSpace(line)
			flags = append(flags, strings.Fields(strings.TrimSuffix(line, "\\"))...)
			if !strings.HasSuffix(line, "\\") {
				break
			}
		}
		for i, f := range flags {
			if strings.HasPrefix(f, "schedules=") {
				flags[i] = "schedules=" + chartSchedules // the reader's own file
			}
		}
		// As given: the command must set image.repository itself.
		r, err := deploytest.HelmRenderAsGiven(t, "readsync", flags...)
		if err != nil {
			t.Errorf("%s: helm install … %s: %v", doc, strings.Join(flags, " "), err)
			continue
		}
		checkLabels(t, r)
		set := " " + strings.Join(flags, " ") + " "
		for _, o := range []struct {
			flag     string
			rendered bool
		}{
			{"verify.enabled=true", len(deploytest.All[batchv1.CronJob](r)) == 1},
			{"metrics.serviceMonitor.enabled=true", len(deploytest.All[monitoringv1.ServiceMonitor](r)) == 1},
			{"prometheusRule.enabled=true", len(deploytest.All[monitoringv1.PrometheusRule](r)) == 1},
			{"grafanaDashboard.enabled=true", slices.ContainsFunc(deploytest.All[corev1.ConfigMap](r), func(c *corev1.ConfigMap) bool { return c.Name == "readsync-dashboard" })},
			{"replicaCount=3", *deploytest.Find[appsv1.StatefulSet](t, r, "readsync").Spec.Replicas == 3},
		} {
			if strings.Contains(set, " "+o.flag+" ") && !o.rendered {
				t.Errorf("%s: helm install … --set %s does not render what it sets", doc, o.flag)
			}
		}
	}
}
