package app

// What the Kubernetes machinery does with the rendered manifests, as far
// as readsync depends on it: the API server decoding each object strictly,
// the controllers naming and annotating the pods, and the kubelet building
// a container's environment. The manifest tests run the binary on what
// these produce.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
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

// object is any decoded Kubernetes object.
type object interface {
	runtime.Object
	metav1.Object
}

// manifests are the objects of one rendering, in the API's own types.
type manifests struct {
	what string // the command that rendered them, for messages
	objs []object
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

// crdDir holds the CustomResourceDefinitions of the custom kinds the
// manifests may contain, from the release of the Go types that decode
// them (TestCRDsMatchTheirTypes).
const crdDir = "testdata/crds"

// crdSchemas are the OpenAPI schemas of those CRDs, by kind. The Go types
// reject unknown fields; the schemas are what else the API server checks
// of a custom resource: formats, patterns, enums, required fields.
var crdSchemas = sync.OnceValues(func() (map[schema.GroupVersionKind]*spec.Schema, error) {
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s: %v", crdDir, err)
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

// validateCRD checks a custom resource, as JSON, against its CRD's schema;
// objects of built-in kinds pass.
func validateCRD(gvk schema.GroupVersionKind, j []byte) error {
	schemas, err := crdSchemas()
	if err != nil {
		return err
	}
	s, ok := schemas[gvk]
	switch {
	case ok:
	case gvk.Group == monitoringv1.SchemeGroupVersion.Group:
		return fmt.Errorf("%s: no CRD in %s", gvk, crdDir)
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

// decodeManifests splits a multi-document YAML stream and decodes each
// document as the API server's strict field validation does: duplicate
// keys, unknown fields and fields in the wrong case are errors.
func decodeManifests(what string, stream []byte) (manifests, error) {
	m := manifests{what: what}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, fmt.Errorf("%s: not YAML: %w", what, err)
		}
		o, err := decodeObject(doc)
		if err != nil {
			return m, fmt.Errorf("%s: %w", what, err)
		}
		if o != nil {
			m.objs = append(m.objs, o)
		}
	}
	if len(m.objs) == 0 {
		return m, fmt.Errorf("%s rendered nothing", what)
	}
	return m, nil
}

// decodeObject decodes one document; a document of comments alone is nil.
func decodeObject(doc []byte) (object, error) {
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
	o := ro.(object)
	if len(strict) > 0 {
		return nil, fmt.Errorf("%s %s: %w", tm.Kind, o.GetName(), errors.Join(strict...))
	}
	if err := validateCRD(gvk, j); err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.Kind, o.GetName(), err)
	}
	return o, nil
}

// find returns the object of type T with that name.
func find[T any, PT interface {
	*T
	object
}](t *testing.T, m manifests, name string) PT {
	t.Helper()
	for _, o := range m.objs {
		if p, ok := o.(PT); ok && p.GetName() == name {
			return p
		}
	}
	t.Fatalf("%s: no %T named %q", m.what, PT(nil), name)
	return nil
}

// all returns the objects of type T.
func all[T any, PT interface {
	*T
	object
}](m manifests) []PT {
	var out []PT
	for _, o := range m.objs {
		if p, ok := o.(PT); ok {
			out = append(out, p)
		}
	}
	return out
}

// pod is a pod as its controller creates it from a template: the name,
// labels and annotations the environment's field references may read, and
// the spec, which the Job controller amends.
type pod struct {
	name        string
	labels      map[string]string
	annotations map[string]string
	spec        corev1.PodSpec
}

// statefulSetPod is the StatefulSet's pod of that ordinal: named
// <set>-<ordinal>, labelled with its ordinal and name.
func statefulSetPod(s *appsv1.StatefulSet, ordinal int) pod {
	name := fmt.Sprintf("%s-%d", s.Name, ordinal)
	labels := maps.Clone(s.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels["apps.kubernetes.io/pod-index"] = strconv.Itoa(ordinal)
	labels["statefulset.kubernetes.io/pod-name"] = name
	return pod{name: name, labels: labels, annotations: maps.Clone(s.Spec.Template.Annotations), spec: *s.Spec.Template.Spec.DeepCopy()}
}

// indexedJobPod is an Indexed Job's pod for that completion index: named
// <job>-<index>-<random>, with the index in an annotation and a label, and
// JOB_COMPLETION_INDEX appended to every container's environment unless
// the container declares it.
func indexedJobPod(j *batchv1.Job, index int) pod {
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
	return pod{name: fmt.Sprintf("%s-%d-x7k2q", j.Name, index), labels: labels, annotations: annotations, spec: spec}
}

// secretLookup returns a key of a Secret, as the kubelet reads it.
type secretLookup func(name, key string) (string, error)

// containerEnv builds a container's environment as the kubelet does: the
// API server's address (which it sets in every pod, service links or
// not), then envFrom, then env in order, each value with $(VAR) references
// to the variables before it expanded, field references read from the pod.
func containerEnv(m manifests, p pod, c *corev1.Container, secret secretLookup) (map[string]string, error) {
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			return nil, fmt.Errorf("container %s: envFrom %+v: only ConfigMaps are expected (credentials use secretKeyRef)", c.Name, from)
		}
		cm, err := configMap(m, from.ConfigMapRef.Name)
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

func envValue(m manifests, p pod, e corev1.EnvVar, env map[string]string, secret secretLookup) (string, error) {
	if e.Value != "" || e.ValueFrom == nil {
		return expandVars(e.Value, env), nil
	}
	from := e.ValueFrom
	switch {
	case from.FieldRef != nil:
		return fieldValue(p, from.FieldRef.FieldPath)
	case from.SecretKeyRef != nil:
		return secret(from.SecretKeyRef.Name, from.SecretKeyRef.Key)
	case from.ConfigMapKeyRef != nil:
		cm, err := configMap(m, from.ConfigMapKeyRef.Name)
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
func fieldValue(p pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return p.name, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": p.labels, "metadata.annotations": p.annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok {
			if key, ok = strings.CutSuffix(key, "']"); ok {
				return m[key], nil // a missing key reads as empty
			}
		}
	}
	return "", fmt.Errorf("field path %q: not one this test knows", path)
}

// expandVars expands $(VAR) references in a value by the kubelet's rules:
// a defined variable is replaced, an undefined one is left as written,
// $$ is a literal $, and a $ that starts no reference is kept.
func expandVars(s string, env map[string]string) string {
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

// expandSubPath expands a volume mount's subPathExpr, in which, unlike in
// a value, an undefined variable is an error that keeps the pod from
// starting.
func expandSubPath(expr string, env map[string]string) (string, error) {
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
	return expandVars(expr, env), nil
}

func configMap(m manifests, name string) (*corev1.ConfigMap, error) {
	for _, cm := range all[corev1.ConfigMap](m) {
		if cm.Name == name {
			return cm, nil
		}
	}
	return nil, fmt.Errorf("%s renders no ConfigMap %q", m.what, name)
}

func TestExpandVars(t *testing.T) {
	env := map[string]string{"POD_NAME": "readsync-2", "N": "3", "EMPTY": ""}
	tests := []struct{ in, want string }{
		{"$(POD_NAME)/3", "readsync-2/3"},
		{"$(POD_NAME)/$(N)", "readsync-2/3"},
		{"$(UNDEFINED)/3", "$(UNDEFINED)/3"},
		{"$$(POD_NAME)", "$(POD_NAME)"},
		{"a$$b", "a$b"},
		{"$(EMPTY)x", "x"},
		{"cost: 5$", "cost: 5$"},
		{"$x", "$x"},
		{"$(POD_NAME", "$(POD_NAME"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := expandVars(tt.in, env); got != tt.want {
			t.Errorf("expandVars(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got, err := expandSubPath("$(N)", env); got != "3" || err != nil {
		t.Errorf("expandSubPath($(N)) = %q, %v", got, err)
	}
	if _, err := expandSubPath("$(JOB_COMPLETION_INDEX)", env); err == nil {
		t.Errorf("expandSubPath of an undefined variable: no error")
	}
}

// serviceMonitor is a ServiceMonitor with an endpoint's interval and one
// more field.
func serviceMonitor(interval, field string) string {
	return "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: x\nspec:\n" +
		"  selector:\n    matchLabels:\n      a: b\n  endpoints:\n    - port: http\n      interval: " + interval + "\n      " + field + "\n"
}

// The decoder must reject what the API server's strict validation rejects,
// or the manifest tests would pass manifests a cluster refuses.
func TestDecodeObjectIsStrict(t *testing.T) {
	tests := []struct {
		name, doc string
		ok        bool
	}{
		{"valid", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  A: b\n", true},
		{"comments only", "# nothing\n", true},
		{"unknown field", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndatas:\n  A: b\n", false},
		{"wrong case", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: x\nspec:\n  Replicas: 3\n", false},
		{"nested wrong case", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  ports:\n    - name: http\n      port: 1\n      targetport: http\n", false},
		{"duplicate key", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  name: y\n", false},
		{"unknown kind", "apiVersion: v1\nkind: Deployment\nmetadata:\n  name: x\n", false},
		{"wrong type", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: x\nspec:\n  replicas: three\n", false},
		{"PodMonitor", "apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata:\n  name: x\nspec:\n  selector: {}\n  podMetricsEndpoints:\n    - port: http\n", true},
		{"PodMonitor, unknown field", "apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata:\n  name: x\nspec:\n  selector: {}\n  podMetricsEndpoints:\n    - port: http\n      paht: /metrics\n", false},
		{"PrometheusRule, unknown field", "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: x\nspec:\n  groups:\n    - name: g\n      rules:\n        - alert: A\n          expr: up == 0\n          four: 5m\n", false},
		{"custom resource", serviceMonitor("30s", "path: /metrics"), true},
		{"custom resource, unknown field", serviceMonitor("30s", "paths: /metrics"), false},
		// What only the CRD's schema says: a duration's pattern, an enum.
		{"custom resource, bad duration", serviceMonitor("30 s", "path: /metrics"), false},
		{"custom resource, value not in enum", serviceMonitor("30s", "scheme: ftp"), false},
	}
	for _, tt := range tests {
		_, err := decodeObject([]byte(tt.doc))
		if (err == nil) != tt.ok {
			t.Errorf("%s: error %v, want ok %t", tt.name, err, tt.ok)
		}
	}
}
