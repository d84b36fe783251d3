package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/deployments/deploytest"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/internal/config"
	"github.com/readsync/readsync/internal/kubeapi/kubeapitest"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

// scalingRoute changes the StatefulSet's replicas to n one way, leaving
// the API server holding the object as that way leaves it, and returns
// the manifests the pods' configuration comes from.
type scalingRoute struct {
	name   string
	change func(t *testing.T, kube *kubeapitest.Server, n int) deploytest.Manifests
}

// Every way of changing the replica count, 1 → 3 → 2 → 5, keeps every
// scheduled name fetched exactly once per tick after the first tick of
// each change. The pods are long-lived daemons, as the kubelet runs them:
// each reads its StatefulSet from the API server (served as JSON of the
// k8s.io/api types, authorized by the rendered Role) before each pass, and
// none is restarted by a change, since the count is not in the template.
func TestStatefulSetScalingFetchesEveryNameOnce(t *testing.T) {
	t.Parallel()
	projects := apitest.Generate(50, 1, 5)
	names := apptest.NamesOf(projects)
	srv := deploytest.NewUpstream(t, projects)
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	apptest.WriteScheduleList(t, schedules, "@every 1h", names[:35], names[15:])
	settings := map[string]string{"READSYNC_API_BASE_URL": srv.URL, "READSYNC_RATE_LIMIT": "0", "READSYNC_LOG_FORMAT": "json"}

	// A copy of the base with these settings and schedules, as an
	// installation edits it, and an overlay of one's own beside it.
	base := deploytest.ScaledBase(t, 1)
	var env strings.Builder
	for k, v := range settings {
		fmt.Fprintf(&env, "%s=%s\n", k, v)
	}
	apptest.WriteFile(t, filepath.Join(base, "readsync.env"), env.String())
	apptest.CopyFile(t, schedules, filepath.Join(base, "schedules.yaml"))
	overlay := filepath.Join(filepath.Dir(base), "mine")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	helmFlags := []string{"--set-file", "schedules=" + schedules}
	for k, v := range settings {
		helmFlags = append(helmFlags, "--set-string", "settings."+k+"="+v)
	}
	applied := func(kube *kubeapitest.Server, m deploytest.Manifests) deploytest.Manifests {
		kube.Apply(deploytest.Find[appsv1.StatefulSet](t, m, "readsync"))
		return m
	}
	// kubectl scale, kubectl edit and a HorizontalPodAutoscaler all write
	// spec.replicas (the last two through the scale subresource) and
	// nothing else; the first change applies the manifests as installed.
	scale := func(t *testing.T, kube *kubeapitest.Server, n int) deploytest.Manifests {
		m := deploytest.KustomizeBuild(t, base)
		if kube.Get("readsync") == nil {
			applied(kube, m)
		}
		kube.Scale("readsync", int32(n))
		return m
	}
	routes := []scalingRoute{
		{"overlay with replicas", func(t *testing.T, kube *kubeapitest.Server, n int) deploytest.Manifests {
			apptest.WriteFile(t, filepath.Join(overlay, "kustomization.yaml"),
				fmt.Sprintf("resources:\n  - ../%s\nreplicas:\n  - name: readsync\n    count: %d\n", filepath.Base(base), n))
			return applied(kube, deploytest.KustomizeBuild(t, overlay))
		}},
		{"kustomize edit set replicas", func(t *testing.T, kube *kubeapitest.Server, n int) deploytest.Manifests {
			deploytest.Run(t, deploytest.Kustomize, base, "edit", "set", "replicas", fmt.Sprintf("readsync=%d", n))
			return applied(kube, deploytest.KustomizeBuild(t, base))
		}},
		{"kubectl scale", scale},
		{"autoscaler", scale},
		{"helm upgrade --set replicaCount", func(t *testing.T, kube *kubeapitest.Server, n int) deploytest.Manifests {
			return applied(kube, deploytest.HelmTemplate(t, "readsync", append(slices.Clone(helmFlags), "--set", fmt.Sprintf("replicaCount=%d", n))...))
		}},
	}
	for _, route := range routes {
		t.Run(route.name, func(t *testing.T) {
			// The edits of one route must not leak into the next.
			deploytest.Run(t, deploytest.Kustomize, base, "edit", "set", "replicas", "readsync=1")
			kube := kubeapitest.NewServer(t, "readsync")
			c := &cluster{t: t, srv: srv, kube: kube, pods: map[int]*daemonPod{}, tick: time.Now().UTC().Truncate(time.Second)}
			var template any
			for step, n := range []int{1, 3, 2, 5} {
				m := route.change(t, kube, n)
				kube.Allow(deploytest.Find[rbacv1.Role](t, m, "readsync"))
				s := kube.Get("readsync")
				if int(*s.Spec.Replicas) != n {
					t.Fatalf("%s to %d: the API server holds replicas %d", route.name, n, *s.Spec.Replicas)
				}
				if step == 0 {
					template = s.Spec.Template
				} else if !reflect.DeepEqual(template, s.Spec.Template) {
					t.Errorf("%s to %d changed the pod template: every pod would be replaced", route.name, n)
				}
				if step > 0 {
					// The tick of the change: the pods of before, those
					// being removed included, read the new count.
					for sched, fetched := range c.tickAll() {
						for _, name := range names {
							if fetched[name] > 1 {
								t.Errorf("%s to %d, tick of the change: %q fetched %d times by schedule %s", route.name, n, name, fetched[name], sched)
							}
						}
					}
				}
				c.settle(m, s, n)
				for k := range 2 {
					for sched, fetched := range c.tickAll() {
						for _, name := range c.scheduled(sched) {
							if fetched[name] != 1 {
								t.Errorf("%s to %d, tick %d after the change: schedule %s fetched %q %d times, want once",
									route.name, n, k+1, sched, name, fetched[name])
							}
						}
					}
				}
				for ordinal, p := range c.pods {
					if got := gauge(t, p.app.metrics.Registry(), "readsync_shards"); got != float64(n) {
						t.Errorf("%s to %d: pod %d's readsync_shards is %v", route.name, n, ordinal, got)
					}
				}
			}
		})
	}
}

// cluster is the StatefulSet's pods as the controller and the kubelet keep
// them: one long-lived daemon per ordinal.
type cluster struct {
	t    *testing.T
	srv  *apitest.Server
	kube *kubeapitest.Server
	pods map[int]*daemonPod
	tick time.Time
}

// daemonPod is one pod's readsync daemon, without the scheduler: the test
// runs its passes at ticks of its own.
type daemonPod struct {
	app       *app
	syncer    *sync.Syncer
	schedules []sync.Schedule
	log       *bytes.Buffer
}

// settle does what the StatefulSet controller does after a change to n:
// the pods beyond n are gone, the missing ones have started.
func (c *cluster) settle(m deploytest.Manifests, s *appsv1.StatefulSet, n int) {
	for ordinal := range c.pods {
		if ordinal >= n {
			delete(c.pods, ordinal)
		}
	}
	for ordinal := range n {
		if c.pods[ordinal] == nil {
			c.pods[ordinal] = c.start(m, deploytest.StatefulSetPod(s, ordinal))
		}
	}
}

// start starts a pod's daemon with the environment the kubelet gives it,
// reading its share at start as the daemon does.
func (c *cluster) start(m deploytest.Manifests, p deploytest.Pod) *daemonPod {
	t := c.t
	t.Helper()
	env := deploytest.PodEnv(t, m, m.What+" pod "+p.Name, p, deploytest.ExampleSecret.Lookup(deploytest.Credentials))
	maps.Copy(env, c.kube.Env())
	cfg, err := config.Load(context.Background(), config.Environ(env), config.Needs{API: true, DSN: true})
	if err != nil {
		t.Fatalf("pod %s: %v", p.Name, err)
	}
	var log bytes.Buffer
	a, err := newApp(testBuild, cfg, config.Needs{API: true, DSN: true}, newLogger(&log, cfg.LogLevel, "json"), io.Discard, &log)
	if err != nil {
		t.Fatalf("pod %s: %v", p.Name, err)
	}
	if _, err := a.shares.Check(context.Background()); err != nil {
		t.Fatalf("pod %s: %v", p.Name, err)
	}
	return &daemonPod{app: a, syncer: a.syncer(sink.NewJSONLines(io.Discard), nil), schedules: a.armedSchedules(), log: &log}
}

// tickAll runs every pod's pass of each schedule at the next tick, and
// returns how often each name was fetched, by schedule.
func (c *cluster) tickAll() map[string]map[string]int {
	c.tick = c.tick.Add(time.Hour)
	out := map[string]map[string]int{}
	for _, ordinal := range slices.Sorted(maps.Keys(c.pods)) {
		p := c.pods[ordinal]
		for _, s := range p.schedules {
			c.srv.ResetRequests()
			p.app.cronPass(context.Background(), p.syncer, sync.NewResolver(nil), s, c.tick)
			if out[s.Name] == nil {
				out[s.Name] = map[string]int{}
			}
			for _, r := range c.srv.Requests() {
				if r.Path == apitest.DetailPath {
					out[s.Name][r.Query.Get("nft_name")]++
				}
			}
		}
	}
	return out
}

// scheduled returns the names of a schedule, as any pod loaded them.
func (c *cluster) scheduled(schedule string) []string {
	for _, p := range c.pods {
		for _, s := range p.app.cfg.Schedules {
			if s.Name == schedule {
				return s.NFTNames
			}
		}
	}
	c.t.Fatalf("no pod knows schedule %s", schedule)
	return nil
}

// gauge is the value of the gauge name in reg.
func gauge(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s is not exported", name)
	return 0
}
