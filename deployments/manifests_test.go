package deployments_test

// The Kubernetes manifests are a contract with this binary: the variables
// they set, the flags they pass, the port the probes use, the shard each
// pod takes. These tests render them with kustomize and helm, decode every
// object into the API's types as strictly as the API server does, and hold
// them to what the binary reads, so a renamed variable, a moved port or a
// shard count that does not follow the replicas fails here rather than in
// a cluster.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/readsync/readsync/deployments/deploytest"
	"github.com/readsync/readsync/internal/app"
	"github.com/readsync/readsync/internal/apptest"
	"github.com/readsync/readsync/internal/config"
	"github.com/readsync/readsync/internal/shard"
)

const (
	// kubernetesDoc shows the replicas overlay that TestManifestReplicas checks.
	kubernetesDoc = "../docs/kubernetes.md"
	// k8sReplicas is the documented overlay that scales the base.
	k8sReplicas   = "testdata/k8s-replicas"
	appLabel      = "app.kubernetes.io/name"
	containerName = "readsync"
)

func TestManifestSecretExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deploytest.Base, "secret.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := deploytest.DecodeObject(b)
	if err != nil {
		t.Fatalf("secret.example.yaml: %v", err)
	}
	s, ok := o.(*corev1.Secret)
	if !ok || s.Name != deploytest.ExampleSecret.Name {
		t.Fatalf("secret.example.yaml: want a Secret named %s, got %T %s", deploytest.ExampleSecret.Name, o, o.GetName())
	}
	var keys []string
	for k, v := range s.StringData {
		keys = append(keys, k)
		if !strings.Contains(v, "REPLACE_ME") {
			t.Errorf("secret.example.yaml: %s = %q is not an obvious placeholder", k, v)
		}
	}
	var want []string
	for _, k := range deploytest.ExampleSecret.Keys {
		want = append(want, k)
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("secret.example.yaml has keys %q, the manifests read %q", keys, want)
	}
	for _, m := range []deploytest.Manifests{deploytest.KustomizeBuild(t, deploytest.Base), deploytest.HelmTemplate(t, "readsync", "--set", "backfill.enabled=true")} {
		for _, s := range deploytest.All[corev1.Secret](m) {
			t.Errorf("%s renders Secret %q: applying it would overwrite real credentials", m.What, s.Name)
		}
	}
}

func TestManifestDaemon(t *testing.T) {
	m := deploytest.KustomizeBuild(t, deploytest.Base)
	checkLabels(t, m)
	if n := len(deploytest.All[batchv1.Job](m)); n != 0 {
		t.Errorf("the base renders %d Jobs; the backfill belongs in deployments/k8s-backfill", n)
	}
	checkDaemon(t, m, "readsync", 1, deploytest.ExampleSecret)
}

// Scaling is the StatefulSet's replicas and nothing else: with the
// documented command on a copy of the base, or in the documented overlay,
// the pods are the same and read the count themselves; under an overlay's
// namePrefix, the Role still grants the renamed StatefulSet.
func TestManifestReplicas(t *testing.T) {
	overlay, err := os.ReadFile(filepath.Join(k8sReplicas, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(kubernetesDoc)
	if err != nil {
		t.Fatal(err)
	}
	if _, entries, _ := bytes.Cut(overlay, []byte("\nreplicas:\n")); !bytes.Contains(doc, append([]byte("\nreplicas:\n"), entries...)) {
		t.Errorf("%s does not show the replicas of %s, which this test checks", kubernetesDoc, k8sReplicas)
	}
	for _, tt := range []struct {
		dir      string
		replicas int
	}{{deploytest.ScaledBase(t, 4), 4}, {k8sReplicas, 3}} {
		m := deploytest.KustomizeBuild(t, tt.dir)
		checkLabels(t, m)
		checkDaemon(t, m, "readsync", tt.replicas, deploytest.ExampleSecret)
	}

	prefixed := filepath.Join(filepath.Dir(deploytest.ScaledBase(t, 2)), "team")
	if err := os.MkdirAll(prefixed, 0o755); err != nil {
		t.Fatal(err)
	}
	apptest.WriteFile(t, filepath.Join(prefixed, "kustomization.yaml"), "resources:\n  - ../k8s\nnamePrefix: team-\nnamespace: team\n")
	m := deploytest.KustomizeBuild(t, prefixed)
	checkDaemon(t, m, "team-readsync", 2, deploytest.ExampleSecret)
}

func TestManifestBackfill(t *testing.T) {
	b := deploytest.KustomizeBuild(t, deploytest.Backfill)
	checkLabels(t, b)
	checkBackfillAlone(t, b)
	m := beside(deploytest.KustomizeBuild(t, deploytest.Base), b)
	checkBackfill(t, m, "readsync-backfill", 3, deploytest.ExampleSecret)
	if j := deploytest.Find[batchv1.Job](t, m, "readsync-backfill"); j.Spec.TTLSecondsAfterFinished == nil {
		t.Errorf("Job readsync-backfill: want a ttlSecondsAfterFinished, so that the next apply can start a new one")
	}

	// The same configuration as the daemon: everything but the
	// daemon-only port, probes and arguments, and the spool and shard
	// that differ by design, must be equal.
	d := deploytest.Find[appsv1.StatefulSet](t, m, "readsync").Spec.Template.Spec
	j := deploytest.Find[batchv1.Job](t, m, "readsync-backfill").Spec.Template.Spec
	compareSharedPod(t, "StatefulSet readsync", &d, "Job readsync-backfill", &j)

	// parallelism is the one number of a backfill: completions and every
	// index's shard count follow it.
	dir := scaledBackfill(t, 5)
	scaled := beside(deploytest.KustomizeBuild(t, filepath.Join(filepath.Dir(dir), filepath.Base(deploytest.Base))), deploytest.KustomizeBuild(t, dir))
	checkBackfill(t, scaled, "readsync-backfill", 5, deploytest.ExampleSecret)
}

// checkBackfillAlone checks that a backfill's rendering holds the Job and
// what only it needs, so that applying it leaves the daemon as it is.
func checkBackfillAlone(t *testing.T, m deploytest.Manifests) {
	t.Helper()
	for _, o := range m.Objs {
		switch o.(type) {
		// A NetworkPolicy selects the release's own pods (TestChartNetworkPolicy).
		case *batchv1.Job, *corev1.PersistentVolumeClaim, *networkingv1.NetworkPolicy:
		default:
			t.Errorf("%s renders %T %s: applying a backfill must not touch the daemon's objects", m.What, o, o.GetName())
		}
	}
	for _, j := range deploytest.All[batchv1.Job](m) {
		if l := j.Spec.Template.Labels["app.kubernetes.io/component"]; l != "backfill" {
			t.Errorf("%s: Job %s's pods are labelled component %q; the daemon's Services select daemon", m.What, j.Name, l)
		}
	}
}

// beside is what a cluster holds once both renderings are applied: the
// backfill's Job refers to the daemon's ConfigMaps by name.
func beside(daemon, backfill deploytest.Manifests) deploytest.Manifests {
	return deploytest.Manifests{What: backfill.What + " beside " + daemon.What, Objs: append(slices.Clone(daemon.Objs), backfill.Objs...)}
}

// compareSharedPod reports what differs between the daemon's and the
// backfill's pod beyond what must.
func compareSharedPod(t *testing.T, aWhat string, a *corev1.PodSpec, bWhat string, b *corev1.PodSpec) {
	t.Helper()
	shared := func(p *corev1.PodSpec) map[string]any {
		c := p.Containers[0]
		vols := slices.DeleteFunc(slices.Clone(p.Volumes), func(v corev1.Volume) bool { return v.Name == "spool" })
		// The service account differs by design: only the daemon reads
		// the Kubernetes API. Only the chart's daemon waits for its
		// migration hook (READSYNC_MIGRATIONS): a backfill beside it
		// starts after the hook, and one of a release of its own may
		// run a newer release than the daemon's, whose migrations no hook
		// applies.
		env := slices.DeleteFunc(slices.Clone(c.Env), func(e corev1.EnvVar) bool {
			return e.Name == "READSYNC_SHARD" || e.Name == "POD_NAME" || e.Name == "JOB_COMPLETION_INDEX" || e.Name == "READSYNC_MIGRATIONS"
		})
		mounts := slices.Clone(c.VolumeMounts)
		for i := range mounts {
			mounts[i].SubPathExpr = "" // the backfill's indexes share one claim
		}
		return map[string]any{
			"enableServiceLinks": p.EnableServiceLinks, "terminationGracePeriodSeconds": p.TerminationGracePeriodSeconds,
			"securityContext": p.SecurityContext, "volumes": vols,
			"container image": c.Image, "container env": env, "container envFrom": c.EnvFrom,
			"container resources": c.Resources, "container securityContext": c.SecurityContext,
			"container volumeMounts": mounts,
		}
	}
	sa, sb := shared(a), shared(b)
	for _, k := range slices.Sorted(maps.Keys(sa)) {
		if !reflect.DeepEqual(sa[k], sb[k]) {
			t.Errorf("pod %s differs between %s and %s:\n%s\n%s", k, aWhat, bWhat, jsonOf(sa[k]), jsonOf(sb[k]))
		}
	}
}

// checkDaemon checks the StatefulSet: replicas pods, each taking its own
// shard of replicas from its name; the spool on a claim per pod; probes
// and Services on the port readsync listens on.
func checkDaemon(t *testing.T, m deploytest.Manifests, name string, replicas int, secret deploytest.SecretRef) {
	t.Helper()
	s := deploytest.Find[appsv1.StatefulSet](t, m, name)
	what := m.What + ": StatefulSet " + name
	if s.Spec.Replicas == nil || int(*s.Spec.Replicas) != replicas {
		t.Errorf("%s: replicas %v, want %d", what, s.Spec.Replicas, replicas)
	}
	var cfg *config.Config
	for ordinal := range replicas {
		p := deploytest.StatefulSetPod(s, ordinal)
		var c *corev1.Container
		cfg, c = checkPod(t, m, fmt.Sprintf("%s pod %s", what, p.Name), p, secret)
		// The count is the StatefulSet's replicas however they change, so
		// the pod reads it rather than carrying a copy.
		want := shard.Member{Pod: p.Name, Set: s.Name, Ordinal: uint32(ordinal)}
		if cfg.Member == nil || *cfg.Member != want || cfg.ShardOf != shard.All() {
			t.Errorf("%s: pod %s takes shard %v of StatefulSet %+v, want its ordinal of its StatefulSet's replicas (%+v)",
				what, p.Name, cfg.ShardOf, cfg.Member, want)
		}
		checkProbes(t, what, c, cfg)
		checkTokenFor(t, m, what, &p.Spec, s.Name)
	}
	if cfg == nil {
		return
	}
	// The spool is on the pod's own claim, which outlives the pod.
	mount, _ := deploytest.MountOf(&s.Spec.Template.Spec, cfg.SpoolDir)
	var claim *corev1.PersistentVolumeClaim
	for i, vct := range s.Spec.VolumeClaimTemplates {
		if mount != nil && vct.Name == mount.Name {
			claim = &s.Spec.VolumeClaimTemplates[i]
		}
	}
	switch {
	case claim == nil:
		t.Errorf("%s: READSYNC_SPOOL_DIR %s is not on a volumeClaimTemplate: spooled rows would die with the pod", what, cfg.SpoolDir)
	case slices.ContainsFunc(s.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == claim.Name }):
		t.Errorf("%s: pod volume %q shadows the claim template of the same name", what, claim.Name)
	default:
		checkClaimSize(t, what, claim, cfg, 1)
	}
	checkServices(t, m, s, cfg)
	checkDisruptionBudget(t, m, s)
}

// checkDisruptionBudget checks that one PodDisruptionBudget covers the
// daemon's pods and no backfill's, and that it lets a drain proceed: with
// every pod ready, at least one may be evicted, however few the replicas,
// and a pod that is not ready (ClickHouse down) may always be.
func checkDisruptionBudget(t *testing.T, m deploytest.Manifests, s *appsv1.StatefulSet) {
	t.Helper()
	var budgets []*policyv1.PodDisruptionBudget
	for _, b := range deploytest.All[policyv1.PodDisruptionBudget](m) {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil {
			t.Errorf("%s: PodDisruptionBudget %s: selector: %v", m.What, b.Name, err)
			continue
		}
		if sel.Empty() || !sel.Matches(labels.Set(deploytest.StatefulSetPod(s, 0).Labels)) {
			continue
		}
		budgets = append(budgets, b)
		for _, j := range deploytest.All[batchv1.Job](m) {
			if sel.Matches(labels.Set(deploytest.IndexedJobPod(j, 0).Labels)) {
				t.Errorf("%s: PodDisruptionBudget %s selects the pods of Job %s: a backfill's would count against the daemon's budget", m.What, b.Name, j.Name)
			}
		}
	}
	if len(budgets) != 1 {
		t.Errorf("%s: %d PodDisruptionBudgets select the pods of StatefulSet %s, want 1", m.What, len(budgets), s.Name)
		return
	}
	b := budgets[0]
	replicas := int(*s.Spec.Replicas)
	switch allowed, err := disruptionsAllowed(b, replicas, replicas); {
	case err != nil:
		t.Errorf("%s: PodDisruptionBudget %s: %v", m.What, b.Name, err)
	case allowed < 1:
		t.Errorf("%s: PodDisruptionBudget %s lets no pod of %d ready ones be evicted: a drain of their node would never end",
			m.What, b.Name, replicas)
	}
	if p := b.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("%s: PodDisruptionBudget %s: unhealthyPodEvictionPolicy %v, want AlwaysAllow: pods unready while ClickHouse is down would hold up drains",
			m.What, b.Name, p)
	}
}

// disruptionsAllowed is what the disruption controller computes for a
// budget over a workload of that many replicas, healthy of them ready.
func disruptionsAllowed(b *policyv1.PodDisruptionBudget, replicas, healthy int) (int, error) {
	var desired int
	switch spec := b.Spec; {
	case spec.MaxUnavailable != nil && spec.MinAvailable != nil:
		return 0, errors.New("both maxUnavailable and minAvailable, which the API server refuses")
	case spec.MaxUnavailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, replicas, true)
		if err != nil {
			return 0, err
		}
		desired = max(replicas-n, 0)
	case spec.MinAvailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, replicas, true)
		if err != nil {
			return 0, err
		}
		desired = n
	default:
		return 0, errors.New("neither maxUnavailable nor minAvailable")
	}
	return max(healthy-desired, 0), nil
}

// checkBackfill checks the Indexed Job: n indexes, index i taking shard i
// of n, each spooling into its own directory of a persistent claim.
func checkBackfill(t *testing.T, m deploytest.Manifests, name string, n int, secret deploytest.SecretRef) {
	t.Helper()
	j := deploytest.Find[batchv1.Job](t, m, name)
	what := m.What + ": Job " + name
	spec := j.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("%s: completionMode %v, want Indexed", what, spec.CompletionMode)
	}
	if spec.Parallelism == nil || spec.Completions == nil || int(*spec.Parallelism) != n || int(*spec.Completions) != n {
		t.Errorf("%s: parallelism %v and completions %v, want both %d", what, spec.Parallelism, spec.Completions, n)
	}
	if spec.BackoffLimit == nil || *spec.BackoffLimit != 0 {
		t.Errorf("%s: backoffLimit %v, want 0: a retry would fetch every name of the index again", what, spec.BackoffLimit)
	}
	pod0 := &spec.Template.Spec
	if p := pod0.RestartPolicy; p != corev1.RestartPolicyNever {
		t.Errorf("%s: restartPolicy %q, want Never", what, p)
	}
	if backfill, err := app.IsBackfill(pod0.Containers[0].Args); err != nil || !backfill {
		t.Errorf("%s: args %q: want a --backfill the binary accepts (backfill %t, error %v)", what, pod0.Containers[0].Args, backfill, err)
	}
	dirs := map[string]int{}
	var cfg *config.Config
	for index := range n {
		p := deploytest.IndexedJobPod(j, index)
		cfg, _ = checkPod(t, m, fmt.Sprintf("%s index %d", what, index), p, secret)
		if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
			t.Errorf("%s index %d mounts a service account token; a backfill never calls the Kubernetes API", what, index)
		}
		if want := (shard.Share{Index: uint32(index), Count: uint32(n)}); n > 1 && cfg.ShardOf != want {
			t.Errorf("%s: index %d takes shard %v, want %v", what, index, cfg.ShardOf, want)
		}
		mount, vol := deploytest.MountOf(&p.Spec, cfg.SpoolDir)
		if mount == nil || vol == nil || vol.PersistentVolumeClaim == nil {
			t.Errorf("%s: the spool must be a PersistentVolumeClaim, or rows spooled by a backfill vanish with its pod", what)
			return
		}
		env, err := deploytest.ContainerEnv(m, p, &p.Spec.Containers[0], secret.Lookup(deploytest.Credentials))
		if err != nil {
			t.Fatal(err)
		}
		sub, err := deploytest.ExpandSubPath(mount.SubPathExpr, env)
		if err != nil {
			t.Errorf("%s index %d: the spool's %v", what, index, err)
		}
		dirs[vol.PersistentVolumeClaim.ClaimName+"/"+sub+mount.SubPath]++
	}
	for dir, k := range dirs {
		if k > 1 {
			t.Errorf("%s: %d indexes spool into %s; each needs its own directory", what, k, dir)
		}
	}
	if cfg != nil {
		_, vol := deploytest.MountOf(pod0, cfg.SpoolDir)
		claim := deploytest.Find[corev1.PersistentVolumeClaim](t, m, vol.PersistentVolumeClaim.ClaimName)
		checkClaimSize(t, what, claim, cfg, n)
	}
}

// checkPod checks what the daemon and the backfill share: the environment
// against the binary's, credentials from the Secret, the mounts behind the
// paths, security settings, resources and the shutdown grace. It returns
// the configuration the binary loads in that pod.
func checkPod(t *testing.T, m deploytest.Manifests, what string, p deploytest.Pod, secret deploytest.SecretRef) (*config.Config, *corev1.Container) {
	t.Helper()
	pod := &p.Spec
	if len(pod.Containers) != 1 || pod.Containers[0].Name != containerName {
		t.Fatalf("%s: want one container named %s, got %d", what, containerName, len(pod.Containers))
	}
	c := &pod.Containers[0]
	checkVariables(t, m, what, p, c, secret)
	env := deploytest.PodEnv(t, m, what, p, secret.Lookup(deploytest.Credentials))
	cfg, err := config.Load(context.Background(), config.Environ(env), config.Needs{API: true, DSN: true})
	if err != nil {
		t.Fatalf("%s: readsync rejects the manifests' configuration: %v", what, err)
	}

	for _, u := range cfg.Unknown {
		t.Errorf("%s: readsync would ignore %s (did you mean %s?)", what, u.Name, u.Guess)
	}
	if v := env["READSYNC_LOG_FORMAT"]; v != "json" {
		t.Errorf("%s: READSYNC_LOG_FORMAT %q, want json", what, v)
	}
	var grace time.Duration // unset: this test does not rely on the cluster's default
	if g := pod.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if grace <= cfg.ShutdownGrace {
		t.Errorf("%s: terminationGracePeriodSeconds (%s) must exceed READSYNC_SHUTDOWN_GRACE (%s), or a pass is killed before it can spool",
			what, grace, cfg.ShutdownGrace)
	}
	if mount, _ := deploytest.MountOf(pod, cfg.SpoolDir); mount == nil || path.Clean(mount.MountPath) != path.Clean(cfg.SpoolDir) || mount.ReadOnly {
		t.Errorf("%s: READSYNC_SPOOL_DIR %s must be a writable volume's mount point (the root filesystem is read-only)", what, cfg.SpoolDir)
	}
	checkSecurity(t, what, pod, c)
	// Ephemeral storage too: the container's log, which without a limit
	// could fill the node.
	for _, kind := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if _, ok := c.Resources.Requests[kind]; !ok {
			t.Errorf("%s: want a %s request, got %+v", what, kind, c.Resources)
		}
		if _, ok := c.Resources.Limits[kind]; !ok {
			t.Errorf("%s: want a %s limit, got %+v", what, kind, c.Resources)
		}
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Errorf("%s: enableServiceLinks must be false: the links of the Service readsync are READSYNC_* variables", what)
	}
	return cfg, c
}

// checkVariables holds the container's variables to the binary's env
// struct, and the credentials to the Secret.
func checkVariables(t *testing.T, m deploytest.Manifests, what string, p deploytest.Pod, c *corev1.Container, secret deploytest.SecretRef) {
	t.Helper()
	env, err := deploytest.ContainerEnv(m, p, c, secret.Lookup(deploytest.Credentials))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	names := map[string]int{}
	for _, e := range c.Env {
		names[e.Name]++
	}
	for _, from := range c.EnvFrom {
		if cm, err := deploytest.ConfigMap(m, from.ConfigMapRef.Name); err == nil {
			for k := range cm.Data {
				names[from.Prefix+k]++
			}
		}
	}
	for name, n := range names {
		if n > 1 {
			t.Errorf("%s: %s is set %d times; which one wins is not obvious to a reader", what, name, n)
		}
	}
	vars := binaryVariables()
	for name := range env {
		if _, ok := vars[name]; strings.HasPrefix(name, "READSYNC_") && !ok {
			t.Errorf("%s sets %s, which readsync does not read", what, name)
		}
	}
	for name, required := range vars {
		if _, ok := env[name]; (required || name == "READSYNC_CLICKHOUSE_DSN") && !ok {
			t.Errorf("%s does not set %s, which readsync requires", what, name)
		}
	}
	for name, key := range secret.Keys {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		switch {
		case i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil:
			t.Errorf("%s: %s must come from the Secret (secretKeyRef), not a literal value", what, name)
		case c.Env[i].ValueFrom.SecretKeyRef.Name != secret.Name || c.Env[i].ValueFrom.SecretKeyRef.Key != key:
			ref := c.Env[i].ValueFrom.SecretKeyRef
			t.Errorf("%s: %s comes from Secret %s key %s, want %s key %s", what, name, ref.Name, ref.Key, secret.Name, key)
		}
	}
}

// binaryVariables lists the variables the binary reads, and whether each
// is required.
func binaryVariables() map[string]bool {
	vars := map[string]bool{}
	for _, v := range config.Variables() {
		vars[v.Name] = v.Required
	}
	return vars
}

// checkClaimSize checks that a spool claim holds READSYNC_SPOOL_MAX_BYTES
// for each of the pods that share it, so that readsync's own cap applies
// before the volume fills.
func checkClaimSize(t *testing.T, what string, claim *corev1.PersistentVolumeClaim, cfg *config.Config, sharers int) {
	t.Helper()
	size, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		t.Errorf("%s: claim %s requests no storage", what, claim.Name)
		return
	}
	if need := int64(cfg.SpoolMaxBytes) * int64(sharers); size.Value() <= need {
		t.Errorf("%s: claim %s of %s is not above %d x READSYNC_SPOOL_MAX_BYTES (%d bytes): the volume would fill before readsync refuses rows",
			what, claim.Name, size.String(), sharers, cfg.SpoolMaxBytes)
	}
	if len(claim.Spec.AccessModes) == 0 {
		t.Errorf("%s: claim %s has no access mode", what, claim.Name)
	}
}

// startupBudget is the least time the daemon's startupProbe must allow
// before the kubelet restarts a pod: that of a long migration, the
// one-time fold of existing history (about a minute per 70M snapshot rows
// on two cores), so that no probe restarts a pod in the middle of one.
const startupBudget = 30 * time.Minute

// checkProbes checks the daemon's probes: liveness and startup on
// /healthz, which readsync answers from the moment it listens, whatever
// ClickHouse does; readiness on /readyz; all on the port it listens on;
// and a startup budget of a long migration.
func checkProbes(t *testing.T, what string, c *corev1.Container, cfg *config.Config) {
	t.Helper()
	_, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil {
		t.Fatalf("%s: READSYNC_HTTP_ADDR %q: %v", what, cfg.HTTPAddr, err)
	}
	if p := c.StartupProbe; p != nil {
		budget := time.Duration(p.InitialDelaySeconds+max(p.PeriodSeconds, 10)*max(p.FailureThreshold, 3)) * time.Second
		if budget < startupBudget {
			t.Errorf("%s: startupProbe allows %s (initialDelaySeconds + periodSeconds x failureThreshold), want at least %s for a long migration",
				what, budget, startupBudget)
		}
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/healthz"}, {"startupProbe", c.StartupProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: %s: want an httpGet probe of %s", what, p.name, p.path)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: %s path %q, want %s", what, p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got := containerPort(c, p.probe.HTTPGet.Port); got != port {
			t.Errorf("%s: %s port %v is container port %q, but READSYNC_HTTP_ADDR %q listens on %s",
				what, p.name, p.probe.HTTPGet.Port.String(), got, cfg.HTTPAddr, port)
		}
	}
}

func checkSecurity(t *testing.T, what string, pod *corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	ps, cs := pod.SecurityContext, c.SecurityContext
	if ps == nil {
		ps = &corev1.PodSecurityContext{}
	}
	if cs == nil {
		cs = &corev1.SecurityContext{}
	}
	// A container's setting overrides the pod's.
	nonRoot := first(cs.RunAsNonRoot, ps.RunAsNonRoot)
	user := first(cs.RunAsUser, ps.RunAsUser)
	seccomp := first(cs.SeccompProfile, ps.SeccompProfile)
	if nonRoot == nil || !*nonRoot {
		t.Errorf("%s: runAsNonRoot must be true", what)
	}
	if user == nil || *user == 0 {
		t.Errorf("%s: runAsUser must be a numeric, non-root user, so that runAsNonRoot can be verified", what)
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccompProfile must be RuntimeDefault, got %+v", what, seccomp)
	}
	if ps.FSGroup == nil {
		t.Errorf("%s: want an fsGroup, so that the spool volume is writable by the non-root user", what)
	}
	if cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem must be true", what)
	}
	if cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation must be false", what)
	}
	if cs.Capabilities == nil || !slices.Contains(cs.Capabilities.Drop, "ALL") || len(cs.Capabilities.Add) > 0 {
		t.Errorf("%s: capabilities must drop ALL and add none, got %+v", what, cs.Capabilities)
	}
}

// checkTokenFor checks the daemon's access to the Kubernetes API: a token
// of its own service account, whose account mounts it in no other pod, and
// Roles that grant that account get on its StatefulSet and nothing more.
func checkTokenFor(t *testing.T, m deploytest.Manifests, what string, pod *corev1.PodSpec, set string) {
	t.Helper()
	if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be true: the pods read their StatefulSet's replicas", what)
	}
	sa := deploytest.Find[corev1.ServiceAccount](t, m, pod.ServiceAccountName)
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount %s: automountServiceAccountToken must be false, so that only pods that ask get its token", sa.Name)
	}
	if roles := deploytest.All[rbacv1.ClusterRole](m); len(roles) > 0 {
		t.Errorf("%s renders %d ClusterRoles; readsync needs none", m.What, len(roles))
	}
	if bindings := deploytest.All[rbacv1.ClusterRoleBinding](m); len(bindings) > 0 {
		t.Errorf("%s renders %d ClusterRoleBindings; readsync needs none", m.What, len(bindings))
	}
	granted := false
	for _, b := range deploytest.All[rbacv1.RoleBinding](m) {
		for _, sub := range b.Subjects {
			if sub.Kind != rbacv1.ServiceAccountKind || sub.Name != sa.Name || (sub.Namespace != "" && sub.Namespace != sa.Namespace && sa.Namespace != "") {
				t.Errorf("%s: RoleBinding %s binds %s %s/%s; want only the ServiceAccount %s", m.What, b.Name, sub.Kind, sub.Namespace, sub.Name, sa.Name)
			}
		}
		if b.RoleRef.Kind != "Role" || b.RoleRef.APIGroup != rbacv1.GroupName {
			t.Errorf("%s: RoleBinding %s refers to %s %s; want a Role", m.What, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			continue
		}
		role := deploytest.Find[rbacv1.Role](t, m, b.RoleRef.Name)
		checkRules(t, m.What+": Role "+role.Name, role.Rules, set)
		granted = granted || len(role.Rules) > 0
	}
	if !granted {
		t.Errorf("%s: no Role lets ServiceAccount %s get StatefulSet %s", m.What, sa.Name, set)
	}
}

// checkRules holds a Role to least privilege: get (or watch) on the one
// StatefulSet, by name.
func checkRules(t *testing.T, what string, rules []rbacv1.PolicyRule, set string) {
	t.Helper()
	for i, r := range rules {
		ok := slices.Equal(r.APIGroups, []string{"apps"}) && slices.Equal(r.Resources, []string{"statefulsets"}) &&
			slices.Equal(r.ResourceNames, []string{set}) && len(r.NonResourceURLs) == 0 && len(r.Verbs) > 0 &&
			!slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "watch" })
		if !ok {
			t.Errorf("%s: rule %d grants %+v; want get (or watch) on statefulsets %q in group apps, nothing else", what, i, r, set)
		}
	}
}

// checkServices checks the StatefulSet's governing Service and the
// metrics Service: both select the daemon's pods only, and the port named
// http reaches the port readsync listens on.
func checkServices(t *testing.T, m deploytest.Manifests, s *appsv1.StatefulSet, cfg *config.Config) {
	t.Helper()
	_, port, _ := net.SplitHostPort(cfg.HTTPAddr)
	headless := deploytest.Find[corev1.Service](t, m, s.Spec.ServiceName)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("%s: Service %s (the StatefulSet's serviceName) must be headless, clusterIP None", m.What, headless.Name)
	}
	services := []*corev1.Service{headless}
	for _, svc := range deploytest.All[corev1.Service](m) {
		if svc.Name == s.Name {
			services = append(services, svc)
		}
	}
	if len(services) != 2 {
		t.Errorf("%s: no Service %s for the metrics", m.What, s.Name)
	}
	podLabels := s.Spec.Template.Labels
	for _, svc := range services {
		for k, v := range svc.Spec.Selector {
			if podLabels[k] != v {
				t.Errorf("%s: Service %s selector %s=%s does not match the daemon's pod labels %v", m.What, svc.Name, k, v, podLabels)
			}
		}
		if _, ok := svc.Spec.Selector["app.kubernetes.io/component"]; !ok {
			t.Errorf("%s: Service %s selector %v would also select backfill pods", m.What, svc.Name, svc.Spec.Selector)
		}
		c := &s.Spec.Template.Spec.Containers[0]
		i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "http" })
		if i < 0 {
			t.Errorf("%s: Service %s has no port named http", m.What, svc.Name)
			continue
		}
		if p := svc.Spec.Ports[i]; strconv.Itoa(int(p.Port)) != port || containerPort(c, p.TargetPort) != port {
			t.Errorf("%s: Service %s port http %d → %s, want %s → the container's %s", m.What, svc.Name, p.Port, p.TargetPort.String(), port, port)
		}
	}
}

// checkLabels checks that every object and pod template carries the
// common label.
func checkLabels(t *testing.T, m deploytest.Manifests) {
	t.Helper()
	for _, o := range m.Objs {
		if o.GetLabels()[appLabel] != "readsync" {
			t.Errorf("%s: %T %s lacks %s: readsync", m.What, o, o.GetName(), appLabel)
		}
	}
	for _, s := range deploytest.All[appsv1.StatefulSet](m) {
		if s.Spec.Template.Labels[appLabel] != "readsync" {
			t.Errorf("%s: StatefulSet %s: pod template lacks %s: readsync", m.What, s.Name, appLabel)
		}
	}
	for _, j := range deploytest.All[batchv1.Job](m) {
		if j.Spec.Template.Labels[appLabel] != "readsync" {
			t.Errorf("%s: Job %s: pod template lacks %s: readsync", m.What, j.Name, appLabel)
		}
	}
	for _, c := range deploytest.All[batchv1.CronJob](m) {
		if c.Spec.JobTemplate.Labels[appLabel] != "readsync" || c.Spec.JobTemplate.Spec.Template.Labels[appLabel] != "readsync" {
			t.Errorf("%s: CronJob %s: Job or pod template lacks %s: readsync", m.What, c.Name, appLabel)
		}
	}
}

// containerPort resolves a probe's or Service's port (a number or a
// container port's name) to the container port number.
func containerPort(c *corev1.Container, port intstr.IntOrString) string {
	for _, p := range c.Ports {
		if port.Type == intstr.String && p.Name == port.StrVal {
			return strconv.Itoa(int(p.ContainerPort))
		}
	}
	return port.String()
}

func first[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

func jsonOf(v any) string {
	b, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return "  " + string(b)
}

// scaledBackfill is a copy of the backfill overlay (and of the base it
// uses) with the Job's parallelism set to n and its spool claim sized for
// n indexes, as spool-pvc.yaml says to.
func scaledBackfill(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(deploytest.ScaledBase(t, 1)), filepath.Base(deploytest.Backfill))
	replaceIn(t, filepath.Join(dir, "job.yaml"), "\n  parallelism: 3\n", fmt.Sprintf("\n  parallelism: %d\n", n))
	replaceIn(t, filepath.Join(dir, "spool-pvc.yaml"), "\n      storage: 4Gi\n", fmt.Sprintf("\n      storage: %dGi\n", n+1))
	return dir
}

// replaceIn replaces the one occurrence of old in a file.
func replaceIn(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte(old)); n != 1 {
		t.Fatalf("%s: %q occurs %d times, want once", file, old, n)
	}
	if err := os.WriteFile(file, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}
