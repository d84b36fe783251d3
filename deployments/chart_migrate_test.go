package deployments_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/readsync/readsync/deployments/deploytest"
	"github.com/readsync/readsync/internal/app"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/sink/schema/migrate"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
)

// The chart has no image of its own to fall back on: without
// image.repository, helm install and template stop with what to set.
func TestChartRequiresImageRepository(t *testing.T) {
	const want = "image.repository is required: the registry and name of the image make image built and you pushed, such as --set image.repository=registry.example.com/readsync (see docs/kubernetes.md)"
	for _, flags := range [][]string{
		nil,
		{"--set", "image.tag=0.6.0"},
		{"--set", "daemon.enabled=false", "--set", "backfill.enabled=true", "--set", "backfill.daemon=readsync"},
		{"--set", "migrations.hook=false"},
	} {
		_, err := deploytest.HelmRenderAsGiven(t, "readsync", flags...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("helm template %s without image.repository: error %v\nwant one saying %q", strings.Join(flags, " "), err, want)
		}
	}
	m, err := deploytest.HelmRenderAsGiven(t, "readsync", "--set", "image.repository=registry.example.com/team/readsync", "--set", "image.tag=0.6.0-dev-1a2b3c4d5e6f")
	if err != nil {
		t.Fatal(err)
	}
	if image := deploytest.Find[appsv1.StatefulSet](t, m, "readsync").Spec.Template.Spec.Containers[0].Image; image != "registry.example.com/team/readsync:0.6.0-dev-1a2b3c4d5e6f" {
		t.Errorf("StatefulSet runs %s, want the repository and tag set", image)
	}
}

// migrateJob returns the chart's hook Job, or nil.
func migrateJob(m deploytest.Manifests) *batchv1.Job {
	for _, j := range deploytest.All[batchv1.Job](m) {
		if j.Name == "readsync-migrate" {
			return j
		}
	}
	return nil
}

// envOf returns the value of a container's variable and whether it is set.
func envOf(s *appsv1.StatefulSet, name string) (string, bool) {
	for _, e := range s.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// By default Helm runs readsync --migrate as a Job before it installs or
// upgrades the rest, and the daemon's pods wait for the schema; the Job,
// run as its pod would run, applies the migrations with only its own
// environment and the Secret's DSN, logging each.
func TestChartMigrationHook(t *testing.T) {
	m := deploytest.HelmTemplate(t, "readsync", "--set", "settings.READSYNC_RETAIN_RAW=90d")
	j := migrateJob(m)
	if j == nil {
		t.Fatal("no Job readsync-migrate by default")
	}
	if hook := j.Annotations["helm.sh/hook"]; hook != "pre-install,pre-upgrade" {
		t.Errorf("Job readsync-migrate: helm.sh/hook %q, want pre-install,pre-upgrade", hook)
	}
	if p := j.Annotations["helm.sh/hook-delete-policy"]; strings.Contains(p, "hook-succeeded") || !strings.Contains(p, "before-hook-creation") {
		t.Errorf("Job readsync-migrate: hook-delete-policy %q: want it kept until the next hook, for its log", p)
	}
	pod := j.Spec.Template.Spec
	c := pod.Containers[0]
	if !slices.Equal(c.Args, []string{"--migrate"}) || len(pod.Containers) != 1 {
		t.Errorf("Job readsync-migrate runs %v, want readsync --migrate alone", c.Args)
	}
	s := deploytest.Find[appsv1.StatefulSet](t, m, "readsync")
	if daemon := s.Spec.Template.Spec.Containers[0].Image; c.Image != daemon {
		t.Errorf("Job readsync-migrate runs %s, want the daemon's image %s", c.Image, daemon)
	}
	if len(c.EnvFrom) != 0 || len(pod.Volumes) != 0 {
		t.Errorf("Job readsync-migrate reads %v and mounts %v: a pre-install hook runs before the chart's ConfigMaps exist", c.EnvFrom, pod.Volumes)
	}
	if pod.RestartPolicy != "Never" || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("Job readsync-migrate: restartPolicy %s, automountServiceAccountToken %v", pod.RestartPolicy, pod.AutomountServiceAccountToken)
	}
	if v, _ := envOf(s, "READSYNC_MIGRATIONS"); v != "wait" {
		t.Errorf("the daemon's pods: READSYNC_MIGRATIONS=%q, want wait for the hook's migrations", v)
	}

	// Without the hook, none, and the pods migrate themselves; a release
	// of only a backfill leaves the schema to the daemon's release.
	for _, flags := range [][]string{{"--set", "migrations.hook=false"}, {"--set", "daemon.enabled=false", "--set", "backfill.enabled=true", "--set", "backfill.daemon=readsync"}} {
		m := deploytest.HelmTemplate(t, "readsync", flags...)
		if migrateJob(m) != nil {
			t.Errorf("helm template %s renders the migration hook", strings.Join(flags, " "))
		}
		for _, s := range deploytest.All[appsv1.StatefulSet](m) {
			if _, set := envOf(s, "READSYNC_MIGRATIONS"); set {
				t.Errorf("helm template %s: the daemon waits for a hook that does not run", strings.Join(flags, " "))
			}
		}
	}

	// The Job's pod against a real ClickHouse.
	f := apptest.NewFixture(t, []string{"p.eth"})
	p := deploytest.Pod{Name: "readsync-migrate-x7k2q", Labels: j.Spec.Template.Labels, Spec: *pod.DeepCopy()}
	env, err := deploytest.ContainerEnv(m, p, &p.Spec.Containers[0], deploytest.ExampleSecret.Lookup(deploytest.Credentials))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"READSYNC_CLIENT_ID", "READSYNC_CLIENT_SECRET", "READSYNC_SCHEDULES_FILE"} {
		if _, set := env[k]; set {
			t.Errorf("Job readsync-migrate sets %s, which --migrate does not read", k)
		}
	}
	env["READSYNC_CLICKHOUSE_DSN"] = f.DB.DSN // the Secret's, in the cluster
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), c.Args, env, &stdout, &stderr)
	f.NoSecrets(t, stdout.String()+stderr.String())
	if code != app.ExitOK || !strings.Contains(stdout.String(), fmt.Sprintf("at schema version %d, current", migrate.Last())) {
		t.Fatalf("the migrate Job's pod: exit %d, want 0 and the schema current:\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), `"msg":"migration applied","migration":1`) {
		t.Errorf("the migrate Job's log does not show the migrations applied:\n%s", stderr.String())
	}
}
