package main

// The Kubernetes manifests are a contract with this binary: the variables
// they set, the flags they pass, the port the probes use. These tests
// render them with kustomize and hold them to what the binary reads, so a
// renamed variable or a moved port fails here rather than in a cluster.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

const (
	k8sBase     = "../../deployments/k8s"
	k8sBackfill = "../../deployments/k8s-backfill"
	// kustomizeModule is the kustomize `go run` builds when no kustomize is
	// on PATH; later versions need a newer Go than go.mod's.
	kustomizeModule = "sigs.k8s.io/kustomize/kustomize/v5@v5.7.1"
	appLabel        = "app.kubernetes.io/name"
	containerName   = "readsync"
)

// secretVars are the variables that must come from the Secret, never from
// a literal in a manifest.
var secretVars = []string{"READSYNC_CLIENT_ID", "READSYNC_CLIENT_SECRET", "READSYNC_CLICKHOUSE_DSN"}

func TestManifestSchedulesCopy(t *testing.T) {
	root, err := os.ReadFile("../../schedules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(filepath.Join(k8sBase, "schedules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(root, cp) {
		t.Errorf("deployments/k8s/schedules.yaml differs from schedules.yaml; copy it again " +
			"(kustomize cannot read the root file, see deployments/k8s/kustomization.yaml)")
	}
}

func TestManifestSecretExample(t *testing.T) {
	s := exampleSecret(t)
	for k, v := range s.StringData {
		if !strings.Contains(v, "REPLACE_ME") {
			t.Errorf("secret.example.yaml: %s = %q is not an obvious placeholder", k, v)
		}
	}
	for _, o := range render(t, k8sBase) {
		if o.Kind == "Secret" {
			t.Errorf("the base renders Secret %q: applying it would overwrite real credentials", o.Metadata.Name)
		}
	}
}

func TestManifestDaemon(t *testing.T) {
	objs := render(t, k8sBase)
	checkLabels(t, objs)
	if n := len(objectsOf(objs, "Job")); n != 0 {
		t.Errorf("the base renders %d Jobs; the backfill belongs in deployments/k8s-backfill", n)
	}
	var d workload
	decodeOne(t, objs, "Deployment", "readsync", &d)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("Deployment replicas = %v, want 1: each replica runs every schedule", d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != "Recreate" {
		t.Errorf("Deployment strategy %q, want Recreate: a rolling update runs two daemons at once", d.Spec.Strategy.Type)
	}
	cfg, c := checkPod(t, objs, "Deployment readsync", &d.Spec.Template.Spec)
	_, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil {
		t.Fatalf("READSYNC_HTTP_ADDR %q: %v", cfg.HTTPAddr, err)
	}
	for _, p := range []struct {
		name  string
		probe *probe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe of %s", p.name, p.path)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s path %q, want %s", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got := containerPort(c, p.probe.HTTPGet.Port); got != port {
			t.Errorf("%s port %v is container port %q, but READSYNC_HTTP_ADDR %q listens on %s",
				p.name, p.probe.HTTPGet.Port, got, cfg.HTTPAddr, port)
		}
	}
	checkService(t, objs, &d, port)
}

func TestManifestBackfill(t *testing.T) {
	objs := render(t, k8sBackfill)
	checkLabels(t, objs)
	var j workload
	decodeOne(t, objs, "Job", "readsync-backfill", &j)
	cfg, _ := checkPod(t, objs, "Job readsync-backfill", &j.Spec.Template.Spec)
	pod := &j.Spec.Template.Spec
	// A backfill that could not write spools its rows and exits 3; they
	// must outlive the pod for the next backfill to replay them.
	spool, vol := mountOf(pod, cfg.SpoolDir)
	if vol == nil || vol.PersistentVolumeClaim == nil {
		t.Errorf("Job: the spool must be a PersistentVolumeClaim, or rows spooled by a backfill vanish with its pod")
	}
	if p := pod.RestartPolicy; p != "Never" && p != "OnFailure" {
		t.Errorf("Job restartPolicy %q, want Never or OnFailure", p)
	}
	f, err := parseFlags(pod.Containers[0].Args, io.Discard)
	if err != nil || !f.backfill {
		t.Errorf("Job args %q: want a --backfill the binary accepts (flags %+v, error %v)", pod.Containers[0].Args, f, err)
	}

	// "The same configuration" as the daemon: everything but the
	// daemon-only port, probes and arguments, and the spool's volume,
	// must be equal.
	daemon := rawPodSpec(t, objs, "Deployment", "readsync")
	job := rawPodSpec(t, objs, "Job", "readsync-backfill")
	for _, p := range []map[string]any{daemon, job} {
		vols, _ := p["volumes"].([]any)
		p["volumes"] = slices.DeleteFunc(slices.Clone(vols), func(v any) bool {
			m, _ := v.(map[string]any)
			return spool != nil && m["name"] == spool.Name
		})
	}
	for _, key := range []string{"serviceAccountName", "automountServiceAccountToken", "enableServiceLinks",
		"terminationGracePeriodSeconds", "securityContext", "volumes"} {
		if !reflect.DeepEqual(daemon[key], job[key]) {
			t.Errorf("pod %s differs between the Deployment and the Job:\n daemon %v\n    job %v", key, daemon[key], job[key])
		}
	}
	dc, jc := rawContainer(t, daemon), rawContainer(t, job)
	for _, key := range []string{"image", "env", "envFrom", "resources", "securityContext", "volumeMounts"} {
		if !reflect.DeepEqual(dc[key], jc[key]) {
			t.Errorf("container %s differs between the Deployment and the Job:\n daemon %v\n    job %v", key, dc[key], jc[key])
		}
	}
}

// checkPod checks what the daemon and the backfill share: the environment
// against the binary's, credentials from the Secret, the mounts behind the
// paths, security settings, resources and the shutdown grace. It returns
// the configuration the binary loads from that environment.
func checkPod(t *testing.T, objs []object, what string, pod *podSpec) (*config, *container) {
	t.Helper()
	if len(pod.Containers) != 1 || pod.Containers[0].Name != containerName {
		t.Fatalf("%s: want one container named %s, got %d", what, containerName, len(pod.Containers))
	}
	c := &pod.Containers[0]
	env := containerEnv(t, objs, what, c)
	checkVariables(t, what, env)
	cfg := loadPodConfig(t, objs, what, pod, env)

	if v := env["READSYNC_LOG_FORMAT"].value; v != "json" {
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
	checkSpool(t, objs, what, pod, cfg)
	checkSecurity(t, what, pod, c)
	checkServiceAccount(t, objs, what, pod)
	for _, kind := range []string{"cpu", "memory"} {
		if c.Resources.Requests[kind] == nil || c.Resources.Limits[kind] == nil {
			t.Errorf("%s: want %s requests and limits, got %+v", what, kind, c.Resources)
		}
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Errorf("%s: enableServiceLinks must be false: the links of the Service readsync are READSYNC_* variables", what)
	}
	return cfg, c
}

// envValue is one variable of a container's environment and where it
// comes from.
type envValue struct {
	value  string
	secret *keyRef // set when it comes from a Secret
}

// containerEnv resolves the container's environment: env entries and the
// ConfigMaps of envFrom. A variable set twice is an error: which one wins
// is not obvious to a reader.
func containerEnv(t *testing.T, objs []object, what string, c *container) map[string]envValue {
	t.Helper()
	env := map[string]envValue{}
	set := func(name string, v envValue) {
		if _, dup := env[name]; dup {
			t.Errorf("%s: %s is set twice", what, name)
		}
		env[name] = v
	}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil || from.Prefix != "" {
			t.Fatalf("%s: envFrom %+v: only whole ConfigMaps are expected (credentials use secretKeyRef)", what, from)
		}
		for k, v := range configMapData(t, objs, from.ConfigMapRef.Name) {
			set(k, envValue{value: v})
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			set(e.Name, envValue{value: e.Value})
		case e.ValueFrom.SecretKeyRef != nil:
			set(e.Name, envValue{secret: e.ValueFrom.SecretKeyRef})
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			set(e.Name, envValue{value: configMapData(t, objs, ref.Name)[ref.Key]})
		default:
			t.Errorf("%s: %s comes from an unexpected source %+v", what, e.Name, e.ValueFrom)
		}
	}
	return env
}

// checkVariables holds the environment to the binary's env struct.
func checkVariables(t *testing.T, what string, env map[string]envValue) {
	t.Helper()
	vars := binaryVariables(t)
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
	secret := exampleSecret(t)
	for _, name := range secretVars {
		ref := env[name].secret
		switch {
		case ref == nil:
			t.Errorf("%s: %s must come from the Secret (secretKeyRef), not a literal value", what, name)
		case ref.Name != secret.Metadata.Name:
			t.Errorf("%s: %s comes from Secret %q, want %q (secret.example.yaml)", what, name, ref.Name, secret.Metadata.Name)
		case secret.StringData[ref.Key] == "":
			t.Errorf("%s: %s comes from key %q, which secret.example.yaml does not have", what, name, ref.Key)
		}
	}
}

// binaryVariables lists the variables the env struct reads, by its env
// tags, and whether each is required.
func binaryVariables(t *testing.T) map[string]bool {
	t.Helper()
	vars := map[string]bool{}
	typ := reflect.TypeFor[env]()
	for i := range typ.NumField() {
		tag := typ.Field(i).Tag.Get("env")
		if tag == "" {
			t.Fatalf("env field %s has no env tag; teach this test about it", typ.Field(i).Name)
		}
		name, opts, _ := strings.Cut(tag, ",")
		vars[name] = slices.ContainsFunc(strings.Split(opts, ","), func(o string) bool { return strings.TrimSpace(o) == "required" })
	}
	return vars
}

// loadPodConfig runs the binary's own configuration loading on the pod's
// environment, with the Secret's placeholders for credentials and the
// rendered schedules ConfigMap in a file for READSYNC_SCHEDULES_FILE.
func loadPodConfig(t *testing.T, objs []object, what string, pod *podSpec, env map[string]envValue) *config {
	t.Helper()
	secret := exampleSecret(t)
	m := map[string]string{}
	for name, v := range env {
		m[name] = v.value
		if v.secret != nil {
			m[name] = secret.StringData[v.secret.Key]
		}
	}
	file, ok := m["READSYNC_SCHEDULES_FILE"]
	if !ok {
		t.Fatalf("%s does not set READSYNC_SCHEDULES_FILE", what)
	}
	mount, vol := mountOf(pod, file)
	switch {
	case mount == nil:
		t.Fatalf("%s: READSYNC_SCHEDULES_FILE %s is on no volume", what, file)
	case !mount.ReadOnly:
		t.Errorf("%s: the schedules volume at %s must be mounted read-only", what, mount.MountPath)
	}
	if vol == nil || vol.ConfigMap == nil {
		t.Fatalf("%s: READSYNC_SCHEDULES_FILE %s is not on a ConfigMap volume", what, file)
	}
	key := strings.TrimPrefix(file, strings.TrimSuffix(mount.MountPath, "/")+"/")
	data, ok := configMapData(t, objs, vol.ConfigMap.Name)[key]
	if !ok {
		t.Fatalf("%s: ConfigMap %s has no key %q for READSYNC_SCHEDULES_FILE", what, vol.ConfigMap.Name, key)
	}
	local := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(local, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	m["READSYNC_SCHEDULES_FILE"] = local
	cfg, err := loadConfig(context.Background(), environ(m), true)
	if err != nil {
		t.Fatalf("%s: readsync rejects the manifests' configuration: %v", what, err)
	}
	cfg.SchedulesFile = file
	return cfg
}

// checkSpool checks that READSYNC_SPOOL_DIR is a writable volume, large
// enough for READSYNC_SPOOL_MAX_BYTES.
func checkSpool(t *testing.T, objs []object, what string, pod *podSpec, cfg *config) {
	t.Helper()
	mount, vol := mountOf(pod, cfg.SpoolDir)
	if mount == nil || path.Clean(mount.MountPath) != path.Clean(cfg.SpoolDir) {
		t.Errorf("%s: READSYNC_SPOOL_DIR %s must be a volume's mount point (the root filesystem is read-only)", what, cfg.SpoolDir)
		return
	}
	if mount.ReadOnly {
		t.Errorf("%s: the spool volume at %s is read-only", what, mount.MountPath)
	}
	if vol == nil || (vol.EmptyDir == nil && vol.PersistentVolumeClaim == nil) {
		t.Errorf("%s: the spool volume %s should be an emptyDir or a PersistentVolumeClaim", what, mount.Name)
		return
	}
	size, why := "", ""
	switch {
	case vol.EmptyDir != nil:
		size, why = vol.EmptyDir.SizeLimit, "the kubelet would evict the pod, spool and all"
	case vol.PersistentVolumeClaim != nil:
		var pvc struct {
			Spec struct {
				Resources struct {
					Requests struct {
						Storage string `yaml:"storage"`
					} `yaml:"requests"`
				} `yaml:"resources"`
			} `yaml:"spec"`
		}
		decodeOne(t, objs, "PersistentVolumeClaim", vol.PersistentVolumeClaim.ClaimName, &pvc)
		size, why = pvc.Spec.Resources.Requests.Storage, "the volume would fill before readsync refuses rows"
	}
	if size == "" {
		return // no limit, or one this test does not know
	}
	n, err := parseQuantity(size)
	if err != nil {
		t.Fatalf("%s: spool volume size: %v", what, err)
	}
	if n <= int64(cfg.SpoolMaxBytes) {
		t.Errorf("%s: spool volume size %s is not above READSYNC_SPOOL_MAX_BYTES (%d bytes): %s", what, size, cfg.SpoolMaxBytes, why)
	}
}

func checkSecurity(t *testing.T, what string, pod *podSpec, c *container) {
	t.Helper()
	ps, cs := pod.SecurityContext, c.SecurityContext
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
	if seccomp == nil || seccomp.Type != "RuntimeDefault" {
		t.Errorf("%s: seccompProfile must be RuntimeDefault, got %+v", what, seccomp)
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

func checkServiceAccount(t *testing.T, objs []object, what string, pod *podSpec) {
	t.Helper()
	if pod.AutomountServiceAccountToken != nil && *pod.AutomountServiceAccountToken {
		t.Errorf("%s mounts a service account token; readsync never calls the Kubernetes API", what)
	}
	var sa struct {
		Automount *bool `yaml:"automountServiceAccountToken"`
	}
	decodeOne(t, objs, "ServiceAccount", pod.ServiceAccountName, &sa)
	if sa.Automount == nil || *sa.Automount {
		t.Errorf("ServiceAccount %s: automountServiceAccountToken must be false", pod.ServiceAccountName)
	}
}

// checkService checks that the Service named http reaches the daemon's
// metrics port and only the daemon's pods.
func checkService(t *testing.T, objs []object, d *workload, port string) {
	t.Helper()
	var s struct {
		Spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Name       string `yaml:"name"`
				Port       int    `yaml:"port"`
				TargetPort any    `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	decodeOne(t, objs, "Service", "readsync", &s)
	podLabels := d.Spec.Template.Metadata.Labels
	for k, v := range s.Spec.Selector {
		if podLabels[k] != v {
			t.Errorf("Service selector %s=%s does not match the daemon's pod labels %v", k, v, podLabels)
		}
	}
	if _, ok := s.Spec.Selector["app.kubernetes.io/component"]; !ok {
		t.Errorf("Service selector %v would also select backfill pods", s.Spec.Selector)
	}
	c := &d.Spec.Template.Spec.Containers[0]
	for _, p := range s.Spec.Ports {
		if p.Name == "http" {
			if strconv.Itoa(p.Port) != port || containerPort(c, p.TargetPort) != port {
				t.Errorf("Service port http %d → %v, want %s → the container's %s", p.Port, p.TargetPort, port, port)
			}
			return
		}
	}
	t.Errorf("Service readsync has no port named http")
}

// checkLabels checks that every object and pod template carries the
// common label.
func checkLabels(t *testing.T, objs []object) {
	t.Helper()
	for _, o := range objs {
		if o.Metadata.Labels[appLabel] != "readsync" {
			t.Errorf("%s %s lacks %s: readsync", o.Kind, o.Metadata.Name, appLabel)
		}
		if o.Kind == "Deployment" || o.Kind == "Job" {
			var w workload
			decodeOne(t, objs, o.Kind, o.Metadata.Name, &w)
			if w.Spec.Template.Metadata.Labels[appLabel] != "readsync" {
				t.Errorf("%s %s: pod template lacks %s: readsync", o.Kind, o.Metadata.Name, appLabel)
			}
		}
	}
}

// containerPort resolves a probe's or Service's port (a number or a
// container port's name) to the container port number.
func containerPort(c *container, port any) string {
	s := fmt.Sprint(port)
	for _, p := range c.Ports {
		if p.Name == s {
			return strconv.Itoa(p.ContainerPort)
		}
	}
	return s
}

// mountOf returns the volume mount holding file (the longest mount path
// that contains it) and its volume.
func mountOf(pod *podSpec, file string) (*volumeMount, *volume) {
	var best *volumeMount
	for i, m := range pod.Containers[0].VolumeMounts {
		dir := path.Clean(m.MountPath)
		if (file == dir || strings.HasPrefix(file, dir+"/")) && (best == nil || len(dir) > len(path.Clean(best.MountPath))) {
			best = &pod.Containers[0].VolumeMounts[i]
		}
	}
	if best == nil {
		return nil, nil
	}
	for i, v := range pod.Volumes {
		if v.Name == best.Name {
			return best, &pod.Volumes[i]
		}
	}
	return best, nil
}

// parseQuantity parses the binary-suffixed and plain Kubernetes quantities
// a spool size is written in.
func parseQuantity(q string) (int64, error) {
	for i, suffix := range []string{"Ki", "Mi", "Gi", "Ti"} {
		if num, ok := strings.CutSuffix(q, suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			return n << (10 * (i + 1)), err
		}
	}
	n, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("quantity %q: this test reads only whole numbers with Ki, Mi, Gi or Ti", q)
	}
	return n, nil
}

func first[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

// The parts of the Kubernetes objects the tests look at. Fields not
// listed are ignored when decoding.
type (
	object struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name   string            `yaml:"name"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		raw []byte
	}
	workload struct { // a Deployment or a Job
		Spec struct {
			Replicas *int `yaml:"replicas"`
			Strategy struct {
				Type string `yaml:"type"`
			} `yaml:"strategy"`
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec podSpec `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	podSpec struct {
		ServiceAccountName            string      `yaml:"serviceAccountName"`
		AutomountServiceAccountToken  *bool       `yaml:"automountServiceAccountToken"`
		EnableServiceLinks            *bool       `yaml:"enableServiceLinks"`
		TerminationGracePeriodSeconds *int64      `yaml:"terminationGracePeriodSeconds"`
		RestartPolicy                 string      `yaml:"restartPolicy"`
		SecurityContext               secContext  `yaml:"securityContext"`
		Containers                    []container `yaml:"containers"`
		Volumes                       []volume    `yaml:"volumes"`
	}
	secContext struct { // the pod's and the container's, merged
		RunAsNonRoot   *bool  `yaml:"runAsNonRoot"`
		RunAsUser      *int64 `yaml:"runAsUser"`
		SeccompProfile *struct {
			Type string `yaml:"type"`
		} `yaml:"seccompProfile"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Capabilities             *struct {
			Add  []string `yaml:"add"`
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Args    []string `yaml:"args"`
		EnvFrom []struct {
			Prefix       string  `yaml:"prefix"`
			ConfigMapRef *keyRef `yaml:"configMapRef"`
			SecretRef    *keyRef `yaml:"secretRef"`
		} `yaml:"envFrom"`
		Env []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
				ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		Resources      struct {
			Requests map[string]any `yaml:"requests"`
			Limits   map[string]any `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext secContext    `yaml:"securityContext"`
		VolumeMounts    []volumeMount `yaml:"volumeMounts"`
	}
	keyRef struct {
		Name string `yaml:"name"`
		Key  string `yaml:"key"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
	}
	volumeMount struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	}
	volume struct {
		Name     string `yaml:"name"`
		EmptyDir *struct {
			SizeLimit string `yaml:"sizeLimit"`
		} `yaml:"emptyDir"`
		PersistentVolumeClaim *struct {
			ClaimName string `yaml:"claimName"`
		} `yaml:"persistentVolumeClaim"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	}
	secretObject struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		StringData map[string]string `yaml:"stringData"`
	}
)

func exampleSecret(t *testing.T) *secretObject {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(k8sBase, "secret.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var s secretObject
	if err := yaml.Unmarshal(b, &s); err != nil {
		t.Fatalf("secret.example.yaml: %v", err)
	}
	if s.Kind != "Secret" || s.Metadata.Name == "" || len(s.StringData) == 0 {
		t.Fatalf("secret.example.yaml: want a named Secret with stringData, got %+v", s)
	}
	return &s
}

func objectsOf(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// decodeOne decodes the object of that kind and name into v.
func decodeOne(t *testing.T, objs []object, kind, name string, v any) {
	t.Helper()
	for _, o := range objectsOf(objs, kind) {
		if o.Metadata.Name == name {
			if err := yaml.Unmarshal(o.raw, v); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("the manifests render no %s named %q", kind, name)
}

func configMapData(t *testing.T, objs []object, name string) map[string]string {
	t.Helper()
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	decodeOne(t, objs, "ConfigMap", name, &cm)
	return cm.Data
}

// rawPodSpec returns a workload's pod spec as generic YAML values, for
// comparing whole subtrees.
func rawPodSpec(t *testing.T, objs []object, kind, name string) map[string]any {
	t.Helper()
	var w struct {
		Spec struct {
			Template struct {
				Spec map[string]any `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	decodeOne(t, objs, kind, name, &w)
	return w.Spec.Template.Spec
}

func rawContainer(t *testing.T, pod map[string]any) map[string]any {
	t.Helper()
	cs, _ := pod["containers"].([]any)
	for _, c := range cs {
		if m, _ := c.(map[string]any); m["name"] == containerName {
			return m
		}
	}
	t.Fatalf("no container named %s", containerName)
	return nil
}

// render builds a kustomization and splits the output into objects.
func render(t *testing.T, dir string) []object {
	t.Helper()
	out := kustomize(t, "build", dir)
	dec := yaml.NewDecoder(bytes.NewReader(out))
	var objs []object
	for {
		var raw yaml.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("kustomize build %s: output is not YAML: %v", dir, err)
		}
		var o object
		if err := yaml.Unmarshal(raw, &o); err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		o.raw = raw
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		t.Fatalf("kustomize build %s rendered nothing", dir)
	}
	return objs
}

// kustomizeCommand finds a kustomize that runs: the one on PATH, else the
// pinned version through `go run`, which needs nothing in go.mod.
var kustomizeCommand = sync.OnceValues(func() ([]string, error) {
	candidates := [][]string{{"go", "run", kustomizeModule}}
	if _, err := exec.LookPath("kustomize"); err == nil {
		candidates = append([][]string{{"kustomize"}}, candidates...)
	}
	var errs []error
	for _, c := range candidates {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, c[0], append(c[1:], "version")...).CombinedOutput()
		cancel()
		if err == nil {
			return c, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, bytes.TrimSpace(out)))
	}
	return nil, errors.Join(errs...)
})

func kustomize(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd, err := kustomizeCommand()
	if err != nil {
		if os.Getenv("READSYNC_REQUIRE_KUSTOMIZE") == "1" {
			t.Fatalf("kustomize cannot run, and READSYNC_REQUIRE_KUSTOMIZE=1:\n%v", err)
		}
		t.Skipf("kustomize cannot run (set READSYNC_REQUIRE_KUSTOMIZE=1 to fail instead):\n%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	c := exec.CommandContext(ctx, cmd[0], append(cmd[1:], args...)...)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", strings.Join(cmd, " "), strings.Join(args, " "), err, stderr.String())
	}
	return out
}
