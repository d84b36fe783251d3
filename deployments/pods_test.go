package deployments_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/deployments/deploytest"
	"github.com/readsync/readsync/internal/app"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/internal/kubeapi/kubeapitest"
)

// The pods of the StatefulSet, and those of the backfill Job, each run
// readsync with the environment the kubelet would give it, and together
// fetch every scheduled name exactly once: no per-pod configuration, and
// the shard count follows the replicas or the parallelism. The kustomize
// manifests and the chart are rendered with the upstream pointed at the
// fake, as an overlay or values would, and with schedules of their own.
func TestManifestPodsFetchEveryNameOnce(t *testing.T) {
	projects := apitest.Generate(60, 1, 11)
	names := apptest.NamesOf(projects)
	srv := deploytest.NewUpstream(t, projects)
	// Two schedules sharing names: a backfill fetches a shared name once,
	// and so must the pods together.
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	apptest.WriteScheduleList(t, schedules, "0 * * * *", names[:40], names[20:])
	settings := map[string]string{"READSYNC_API_BASE_URL": srv.URL, "READSYNC_RATE_LIMIT": "0", "READSYNC_LOG_FORMAT": "json"}

	// kustomize: the base scaled with the documented command, its settings
	// and schedules edited in place, and the backfill overlay beside it.
	base := deploytest.ScaledBase(t, 3)
	var env strings.Builder
	for k, v := range settings {
		fmt.Fprintf(&env, "%s=%s\n", k, v)
	}
	if err := os.WriteFile(filepath.Join(base, "readsync.env"), []byte(env.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	apptest.CopyFile(t, schedules, filepath.Join(base, "schedules.yaml"))
	backfill := filepath.Join(filepath.Dir(base), filepath.Base(deploytest.Backfill))
	k := beside(deploytest.KustomizeBuild(t, base), deploytest.KustomizeBuild(t, backfill))

	flags := []string{"--set", "replicaCount=4", "--set", "backfill.enabled=true", "--set", "backfill.parallelism=2",
		"--set-file", "schedules=" + schedules}
	for k, v := range settings {
		flags = append(flags, "--set-string", "settings."+k+"="+v)
	}
	h := deploytest.HelmTemplate(t, "prod", flags...)

	// The StatefulSets' pods read their replicas from the API server.
	kube := kubeapitest.NewServer(t, "readsync")
	for _, m := range []deploytest.Manifests{k, h} {
		for _, s := range deploytest.All[appsv1.StatefulSet](m) {
			kube.Apply(s)
		}
	}
	kube.Allow(deploytest.Find[rbacv1.Role](t, k, "readsync"))
	for _, tt := range []struct {
		name string
		m    deploytest.Manifests
		pods []deploytest.Pod
	}{
		{"kustomize StatefulSet", k, statefulSetPods(deploytest.Find[appsv1.StatefulSet](t, k, "readsync"))},
		{"kustomize Job", k, jobPods(deploytest.Find[batchv1.Job](t, k, "readsync-backfill"))},
		{"chart StatefulSet", h, statefulSetPods(deploytest.Find[appsv1.StatefulSet](t, h, "prod-readsync"))},
		{"chart Job", h, jobPods(deploytest.Find[batchv1.Job](t, h, "prod-readsync-backfill"))},
	} {
		if strings.Contains(tt.name, "chart") {
			kube.Allow(deploytest.Find[rbacv1.Role](t, h, "prod-readsync"))
		}
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.pods) < 2 {
				t.Fatalf("%d pods: nothing to split", len(tt.pods))
			}
			fetched := map[string]int{}
			for _, p := range tt.pods {
				srv.ResetRequests()
				runPod(t, tt.m, p, kube.Env())
				n := 0
				for _, r := range srv.Requests() {
					if r.Path == apitest.DetailPath {
						fetched[r.Query.Get("nft_name")]++
						n++
					}
				}
				if n == 0 || n == len(names) {
					t.Errorf("pod %s fetched %d of %d names: the shards do not split them", p.Name, n, len(names))
				}
			}
			for _, name := range names {
				if fetched[name] != 1 {
					t.Errorf("%q fetched %d times by the %d pods, want once", name, fetched[name], len(tt.pods))
				}
			}
			if len(fetched) != len(names) {
				t.Errorf("the pods fetched %d distinct names, want the %d scheduled", len(fetched), len(names))
			}
		})
	}
}

func statefulSetPods(s *appsv1.StatefulSet) []deploytest.Pod {
	var pods []deploytest.Pod
	for i := range int(*s.Spec.Replicas) {
		pods = append(pods, deploytest.StatefulSetPod(s, i))
	}
	return pods
}

func jobPods(j *batchv1.Job) []deploytest.Pod {
	var pods []deploytest.Pod
	for i := range int(*j.Spec.Completions) {
		pods = append(pods, deploytest.IndexedJobPod(j, i))
	}
	return pods
}

// runPod runs readsync in-process with the pod's environment and the
// pod's arguments, as a dry-run backfill: the Job's pods run exactly that
// (written to stdout rather than ClickHouse), the daemon's pods run one
// pass over the same shard of the names.
func runPod(t *testing.T, m deploytest.Manifests, p deploytest.Pod, kubelet map[string]string) {
	t.Helper()
	env := deploytest.PodEnv(t, m, m.What+" pod "+p.Name, p, deploytest.ExampleSecret.Lookup(deploytest.Credentials))
	if p.Spec.AutomountServiceAccountToken != nil && *p.Spec.AutomountServiceAccountToken {
		maps.Copy(env, kubelet) // the API server's address and the token's mount
	}
	args := p.Spec.Containers[0].Args
	if len(args) == 0 {
		args = []string{"--backfill"}
	}
	args = append(args, "--dry-run")
	var stderr bytes.Buffer
	code := run(context.Background(), args, env, io.Discard, &stderr)
	if code != app.ExitOK {
		t.Fatalf("pod %s: readsync %q exited %d:\n%s", p.Name, args, code, stderr.String())
	}
	if strings.Contains(stderr.String(), deploytest.Credentials["READSYNC_CLIENT_SECRET"]) {
		t.Errorf("pod %s: the log leaks the client secret", p.Name)
	}
}
