// Package deploytest renders readsync's deployments with the real tools
// (kustomize, helm) and does with them what the Kubernetes machinery does,
// as far as readsync depends on it: the API server decoding each object
// strictly, the controllers naming and annotating the pods, and the kubelet
// building a container's environment. The deployments' tests and the
// binary's scaling test run readsync on what these produce.
package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/readsync/readsync/apiclient/apitest"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	kjson "sigs.k8s.io/json"
	kyaml "sigs.k8s.io/yaml"
)

// Object is any decoded Kubernetes object.
type Object interface {
	runtime.Object
	metav1.Object
}

// Manifests are the objects of one rendering, in the API's own types.
type Manifests struct {
	What string // the command that rendered them, for messages
	Objs []Object
}

// apiTypes knows the kinds the manifests may contain: those of the core,
// apps, batch, networking, policy and RBAC groups, and the Prometheus
// Operator's monitoring.coreos.com.
var apiTypes = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, networkingv1.AddToScheme, policyv1.AddToScheme, rbacv1.AddToScheme,
		monitoringv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
})

// Path is the file or directory of the deployments at rel, such as
// "k8s" or "helm/readsync", wherever the test that asks runs.
func Path(rel string) string {
	_, file, _, ok := goruntime.Caller(0)
	if !ok {
		panic("deploytest: no caller information to find the deployments by")
	}
	return filepath.Join(filepath.Dir(filepath.Dir(file)), filepath.FromSlash(rel))
}

// The deployments, by their path under deployments/.
const (
	Base     = "k8s"
	Backfill = "k8s-backfill"
	Verify   = "k8s-verify"
	Chart    = "helm/readsync"
	// CRDs holds the CustomResourceDefinitions of the custom kinds the
	// manifests may contain, from the release of the Go types that decode
	// them (TestCRDsMatchTheirTypes).
	CRDs = "testdata/crds"
)

// crdSchemas are the OpenAPI schemas of those CRDs, by kind. The Go types
// reject unknown fields; the schemas are what else the API server checks
// of a custom resource: formats, patterns, enums, required fields.
var crdSchemas = sync.OnceValues(func() (map[schema.GroupVersionKind]*spec.Schema, error) {
	files, err := filepath.Glob(filepath.Join(Path(CRDs), "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s: %v", Path(CRDs), err)
	}
	schemas := map[schema.GroupVersionKind]*spec.Schema{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var crd struct {
			Spec struct {
				Group    string
				Names    struct{ Kind string }
				Versions []struct {
					Name   string
					Schema struct {
						OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
					}
				}
			}
		}
		if err := kyaml.Unmarshal(b, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		for _, v := range crd.Spec.Versions {
			s := new(spec.Schema)
			if err := json.Unmarshal(v.Schema.OpenAPIV3Schema, s); err != nil {
				return nil, fmt.Errorf("%s: version %s: %w", file, v.Name, err)
			}
			schemas[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = s
		}
	}
	return schemas, nil
})

// ValidateCRD checks a custom resource, as JSON, against its CRD's schema;
// objects of built-in kinds pass.
func ValidateCRD(gvk schema.GroupVersionKind, j []byte) error {
	schemas, err := crdSchemas()
	if err != nil {
		return err
	}
	s, ok := schemas[gvk]
	switch {
	case ok:
	case gvk.Group == monitoringv1.SchemeGroupVersion.Group:
		return fmt.Errorf("%s: no CRD in %s", gvk, Path(CRDs))
	default:
		return nil // a built-in kind, which its Go type describes
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		return err
	}
	if res := validate.NewSchemaValidator(s, nil, "", strfmt.Default).Validate(v); !res.IsValid() {
		return fmt.Errorf("the CRD's schema: %w", errors.Join(res.Errors...))
	}
	return nil
}

// DecodeManifests splits a multi-document YAML stream and decodes each
// document as the API server's strict field validation does: duplicate
// keys, unknown fields and fields in the wrong case are errors.
func DecodeManifests(what string, stream []byte) (Manifests, error) {
	m := Manifests{What: what}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, fmt.Errorf("%s: not YAML: %w", what, err)
		}
		o, err := DecodeObject(doc)
		if err != nil {
			return m, fmt.Errorf("%s: %w", what, err)
		}
		if o != nil {
			m.Objs = append(m.Objs, o)
		}
	}
	if len(m.Objs) == 0 {
		return m, fmt.Errorf("%s rendered nothing", what)
	}
	return m, nil
}

// DecodeObject decodes one document; a document of comments alone is nil.
func DecodeObject(doc []byte) (Object, error) {
	j, err := kyaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	if string(bytes.TrimSpace(j)) == "null" {
		return nil, nil
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		return nil, err
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	ro, err := apiTypes().New(gvk)
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q kind %q: %w", tm.APIVersion, tm.Kind, err)
	}
	strict, err := kjson.UnmarshalStrict(j, ro)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	o := ro.(Object)
	if len(strict) > 0 {
		return nil, fmt.Errorf("%s %s: %w", tm.Kind, o.GetName(), errors.Join(strict...))
	}
	if err := ValidateCRD(gvk, j); err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.Kind, o.GetName(), err)
	}
	return o, nil
}

// Find returns the object of type T with that name.
func Find[T any, PT interface {
	*T
	Object
}](t *testing.T, m Manifests, name string) PT {
	t.Helper()
	for _, o := range m.Objs {
		if p, ok := o.(PT); ok && p.GetName() == name {
			return p
		}
	}
	t.Fatalf("%s: no %T named %q", m.What, PT(nil), name)
	return nil
}

// All returns the objects of type T.
func All[T any, PT interface {
	*T
	Object
}](m Manifests) []PT {
	var out []PT
	for _, o := range m.Objs {
		if p, ok := o.(PT); ok {
			out = append(out, p)
		}
	}
	return out
}

// Pod is a pod as its controller creates it from a template: the name,
// labels and annotations the environment's field references may read, and
// the spec, which the Job controller amends.
type Pod struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	Spec        corev1.PodSpec
}

// StatefulSetPod is the StatefulSet's pod of that ordinal: named
// <set>-<ordinal>, labelled with its ordinal and name.
func StatefulSetPod(s *appsv1.StatefulSet, ordinal int) Pod {
	name := fmt.Sprintf("%s-%d", s.Name, ordinal)
	labels := maps.Clone(s.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels["apps.kubernetes.io/pod-index"] = strconv.Itoa(ordinal)
	labels["statefulset.kubernetes.io/pod-name"] = name
	return Pod{Name: name, Labels: labels, Annotations: maps.Clone(s.Spec.Template.Annotations), Spec: *s.Spec.Template.Spec.DeepCopy()}
}

// IndexedJobPod is an Indexed Job's pod for that completion index: named
// <job>-<index>-<random>, with the index in an annotation and a label, and
// JOB_COMPLETION_INDEX appended to every container's environment unless
// the container declares it.
func IndexedJobPod(j *batchv1.Job, index int) Pod {
	const key = "batch.kubernetes.io/job-completion-index"
	labels := maps.Clone(j.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	annotations := maps.Clone(j.Spec.Template.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	labels[key] = strconv.Itoa(index)
	annotations[key] = strconv.Itoa(index)
	spec := *j.Spec.Template.Spec.DeepCopy()
	for i := range spec.Containers {
		c := &spec.Containers[i]
		declared := false
		for _, e := range c.Env {
			declared = declared || e.Name == "JOB_COMPLETION_INDEX"
		}
		if !declared {
			c.Env = append(c.Env, corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + key + "']"},
			}})
		}
	}
	return Pod{Name: fmt.Sprintf("%s-%d-x7k2q", j.Name, index), Labels: labels, Annotations: annotations, Spec: spec}
}

// SecretLookup returns a key of a Secret, as the kubelet reads it.
type SecretLookup func(name, key string) (string, error)

// ContainerEnv builds a container's environment as the kubelet does: the
// API server's address (which it sets in every pod, service links or
// not), then envFrom, then env in order, each value with $(VAR) references
// to the variables before it expanded, field references read from the pod.
func ContainerEnv(m Manifests, p Pod, c *corev1.Container, secret SecretLookup) (map[string]string, error) {
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			return nil, fmt.Errorf("container %s: envFrom %+v: only ConfigMaps are expected (credentials use secretKeyRef)", c.Name, from)
		}
		cm, err := ConfigMap(m, from.ConfigMapRef.Name)
		if err != nil {
			return nil, fmt.Errorf("container %s: envFrom: %w", c.Name, err)
		}
		for k, v := range cm.Data {
			env[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		v, err := envValue(m, p, e, env, secret)
		if err != nil {
			return nil, fmt.Errorf("container %s: %s: %w", c.Name, e.Name, err)
		}
		env[e.Name] = v
	}
	return env, nil
}

func envValue(m Manifests, p Pod, e corev1.EnvVar, env map[string]string, secret SecretLookup) (string, error) {
	if e.Value != "" || e.ValueFrom == nil {
		return ExpandVars(e.Value, env), nil
	}
	from := e.ValueFrom
	switch {
	case from.FieldRef != nil:
		return fieldValue(p, from.FieldRef.FieldPath)
	case from.SecretKeyRef != nil:
		return secret(from.SecretKeyRef.Name, from.SecretKeyRef.Key)
	case from.ConfigMapKeyRef != nil:
		cm, err := ConfigMap(m, from.ConfigMapKeyRef.Name)
		if err != nil {
			return "", err
		}
		v, ok := cm.Data[from.ConfigMapKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("ConfigMap %s has no key %q", cm.Name, from.ConfigMapKeyRef.Key)
		}
		return v, nil
	}
	return "", fmt.Errorf("unexpected source %+v", from)
}

// fieldValue reads a downward API field path of the pod.
func fieldValue(p Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return p.Name, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": p.Labels, "metadata.annotations": p.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok {
			if key, ok = strings.CutSuffix(key, "']"); ok {
				return m[key], nil // a missing key reads as empty
			}
		}
	}
	return "", fmt.Errorf("field path %q: not one this test knows", path)
}

// ExpandVars expands $(VAR) references in a value by the kubelet's rules:
// a defined variable is replaced, an undefined one is left as written,
// $$ is a literal $, and a $ that starts no reference is kept.
func ExpandVars(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch rest := s[i+1:]; {
		case rest[0] == '$':
			b.WriteByte('$')
			i++
		case rest[0] == '(' && strings.IndexByte(rest, ')') > 0:
			end := strings.IndexByte(rest, ')')
			name := rest[1:end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 1 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// ExpandSubPath expands a volume mount's subPathExpr, in which, unlike in
// a value, an undefined variable is an error that keeps the pod from
// starting.
func ExpandSubPath(expr string, env map[string]string) (string, error) {
	var missing []string
	for _, ref := range strings.Split(expr, "$(")[1:] {
		if name, _, ok := strings.Cut(ref, ")"); ok {
			if _, defined := env[name]; !defined {
				missing = append(missing, name)
			}
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("subPathExpr %q: %s not defined in the container's environment", expr, strings.Join(missing, ", "))
	}
	return ExpandVars(expr, env), nil
}

func ConfigMap(m Manifests, name string) (*corev1.ConfigMap, error) {
	for _, cm := range All[corev1.ConfigMap](m) {
		if cm.Name == name {
			return cm, nil
		}
	}
	return nil, fmt.Errorf("%s renders no ConfigMap %q", m.What, name)
}

// SecretRef says which Secret and keys the credentials come from; they
// must never be literals in a manifest.
type SecretRef struct {
	Name string
	Keys map[string]string // variable → key
}

// ExampleSecret is the Secret of secret.example.yaml and the chart's
// default values.
var ExampleSecret = SecretRef{Name: "readsync", Keys: map[string]string{
	"READSYNC_CLIENT_ID":      "client-id",
	"READSYNC_CLIENT_SECRET":  "client-secret",
	"READSYNC_CLICKHOUSE_DSN": "clickhouse-dsn",
}}

// Credentials are what the tests put in the Secret, by variable.
var Credentials = map[string]string{
	"READSYNC_CLIENT_ID":      "1001",
	"READSYNC_CLIENT_SECRET":  "manifest-test-secret",
	"READSYNC_CLICKHOUSE_DSN": "clickhouse://readsync:pw@clickhouse:9000/readsync",
}

// Lookup reads the Secret as the kubelet would, holding credentials.
func (s SecretRef) Lookup(creds map[string]string) SecretLookup {
	return func(name, key string) (string, error) {
		if name != s.Name {
			return "", fmt.Errorf("secretKeyRef names %q, want the Secret %q", name, s.Name)
		}
		for v, k := range s.Keys {
			if k == key {
				return creds[v], nil
			}
		}
		return "", fmt.Errorf("no key %q in the Secret %s", key, name)
	}
}

// NewUpstream serves the projects as the fake upstream, to the
// Credentials the ExampleSecret holds, until the test ends.
func NewUpstream(t *testing.T, projects []apitest.Project) *apitest.Server {
	t.Helper()
	srv := apitest.NewServer(apitest.WithProjects(projects...),
		apitest.WithCredentials(Credentials["READSYNC_CLIENT_ID"], Credentials["READSYNC_CLIENT_SECRET"]))
	t.Cleanup(srv.Close)
	return srv
}

// PodEnv is the pod's environment as the kubelet builds it, with the
// schedules file taken from its ConfigMap volume into a local file.
func PodEnv(t *testing.T, m Manifests, what string, p Pod, secret SecretLookup) map[string]string {
	t.Helper()
	c := &p.Spec.Containers[0]
	env, err := ContainerEnv(m, p, c, secret)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	file, ok := env["READSYNC_SCHEDULES_FILE"]
	if !ok {
		t.Fatalf("%s does not set READSYNC_SCHEDULES_FILE", what)
	}
	mount, vol := MountOf(&p.Spec, file)
	switch {
	case mount == nil:
		t.Fatalf("%s: READSYNC_SCHEDULES_FILE %s is on no volume", what, file)
	case !mount.ReadOnly:
		t.Errorf("%s: the schedules volume at %s must be mounted read-only", what, mount.MountPath)
	}
	if vol == nil || vol.ConfigMap == nil {
		t.Fatalf("%s: READSYNC_SCHEDULES_FILE %s is not on a ConfigMap volume", what, file)
	}
	cm, err := ConfigMap(m, vol.ConfigMap.Name)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	key := strings.TrimPrefix(file, strings.TrimSuffix(mount.MountPath, "/")+"/")
	data, ok := cm.Data[key]
	if !ok {
		t.Fatalf("%s: ConfigMap %s has no key %q for READSYNC_SCHEDULES_FILE", what, cm.Name, key)
	}
	local := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(local, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	env["READSYNC_SCHEDULES_FILE"] = local
	return env
}

// MountOf returns the volume mount holding file (the longest mount path
// that contains it) and its volume.
func MountOf(pod *corev1.PodSpec, file string) (*corev1.VolumeMount, *corev1.Volume) {
	var best *corev1.VolumeMount
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

// ScaledBase is a copy of the base scaled to n replicas with the command
// docs/kubernetes.md gives, and a copy of the backfill overlay beside it.
func ScaledBase(t *testing.T, n int) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{Base, Backfill} {
		if err := os.CopyFS(filepath.Join(root, filepath.Base(d)), os.DirFS(Path(d))); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(root, filepath.Base(Base))
	Run(t, Kustomize, dir, "edit", "set", "replicas", fmt.Sprintf("readsync=%d", n))
	return dir
}

// KustomizeBuild renders a kustomization.
func KustomizeBuild(t *testing.T, dir string) Manifests {
	t.Helper()
	out := Run(t, Kustomize, "", "build", dir)
	m, err := DecodeManifests("kustomize build "+dir, out)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Image is the image.repository the tests render the chart with, which
// the chart requires.
const Image = "registry.example.com/readsync"

// HelmTemplate renders the chart as release, with image.repository set to
// Image and helm flags such as --set (which may set it again).
func HelmTemplate(t *testing.T, release string, flags ...string) Manifests {
	t.Helper()
	out, err := HelmRender(t, release, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// HelmRender is HelmTemplate, which returns helm's error.
func HelmRender(t *testing.T, release string, flags ...string) (Manifests, error) {
	t.Helper()
	return HelmRenderAsGiven(t, release, append([]string{"--set", "image.repository=" + Image}, flags...)...)
}

// HelmRenderAsGiven renders the chart with the flags given and nothing
// else: a user's command.
func HelmRenderAsGiven(t *testing.T, release string, flags ...string) (Manifests, error) {
	t.Helper()
	args := append([]string{"template", release, Path(Chart), "--namespace", "readsync"}, flags...)
	out, err := Output(t, Helm, "", args...)
	if err != nil {
		return Manifests{}, err
	}
	return DecodeManifests("helm "+strings.Join(args, " "), out)
}

// A tool the tests run, from PATH: `make tools` installs the pinned
// versions (scripts/tools.sh) and `make test` puts them first on PATH.
// Nothing is built here, where a build would spend the tests' own time
// limit. required names the variable that turns "cannot run" from a skip
// into a failure; version is the argument that makes the tool say its
// version, which tells that it runs.
type Tool struct {
	name, required, version string
	find                    func() (string, error)
}

// The tools that render the deployments.
var (
	Kustomize = NewTool("kustomize", "READSYNC_REQUIRE_KUSTOMIZE", "version")
	Helm      = NewTool("helm", "READSYNC_REQUIRE_HELM", "version")
)

// NewTool is a tool found on PATH by name, which runs when version is its
// only argument.
func NewTool(name, required, version string) *Tool {
	s := &Tool{name: name, required: required, version: version}
	s.find = sync.OnceValues(func() (string, error) {
		path, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%w (make tools installs it)", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, path, version).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s %s: %w: %s", path, version, err, bytes.TrimSpace(out))
		}
		return path, nil
	})
	return s
}

// Run runs a tool in dir (the package's directory if empty) and returns
// its standard output; any failure fails the test.
func Run(t *testing.T, s *Tool, dir string, args ...string) []byte {
	t.Helper()
	out, err := runTool(ToolPath(t, s), dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func Output(t *testing.T, s *Tool, dir string, args ...string) ([]byte, error) {
	t.Helper()
	return runTool(ToolPath(t, s), dir, args...)
}

// ToolPath returns the path of a tool that runs; when none does, it fails
// the test if the tool's variable requires it, else skips it.
func ToolPath(t *testing.T, s *Tool) string {
	t.Helper()
	path, err := s.find()
	if err != nil {
		if os.Getenv(s.required) == "1" {
			t.Fatalf("%s cannot run, and %s=1:\n%v", s.name, s.required, err)
		}
		t.Skipf("%s cannot run (set %s=1 to fail instead):\n%v", s.name, s.required, err)
	}
	return path
}

func runTool(path, dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	c := exec.CommandContext(ctx, path, args...)
	c.Dir = dir
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		// What it printed is returned too: helm lint reports on stdout.
		return out, fmt.Errorf("%s %s: %w\n%s", path, strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
