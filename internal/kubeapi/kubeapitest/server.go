// Package kubeapitest is a fake Kubernetes API server for tests of
// readsync's kubeapi client and of the pods that use it, shaped like
// httptest.Server.
package kubeapitest

import (
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Server is the Kubernetes API server as readsync sees it: over TLS, to
// a bearer token, it serves the StatefulSets of one namespace as the API
// server does, as JSON of the k8s.io/api types, and authorizes each
// request by the rules of the Role it was given. Like httptest.Server, it
// is started by NewServer and closed (waiting for its handlers) by the
// test's cleanup. Its methods may be called from any goroutine.
type Server struct {
	srv       *httptest.Server
	namespace string
	// Dir is the service account mount a pod would have: token, ca.crt
	// and namespace.
	Dir string

	mu       sync.Mutex
	token    string
	sets     map[string]*appsv1.StatefulSet
	rules    []rbacv1.PolicyRule
	requests []string // method and path of each request, in order
}

// NewServer starts a server of the StatefulSets of namespace, which
// authorizes nothing until Allow and holds nothing until Apply; the
// test's cleanup closes it.
func NewServer(t testing.TB, namespace string) *Server {
	t.Helper()
	k := &Server{namespace: namespace, Dir: t.TempDir(), token: "sa-token-1", sets: map[string]*appsv1.StatefulSet{}}
	k.srv = httptest.NewUnstartedServer(http.HandlerFunc(k.serve))
	// A client that refuses the certificate is a case under test, not news.
	k.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	k.srv.StartTLS()
	t.Cleanup(k.srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.srv.Certificate().Raw})
	for name, content := range map[string][]byte{"ca.crt": ca, "namespace": []byte(namespace), "token": []byte(k.token)} {
		if err := os.WriteFile(filepath.Join(k.Dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// Env is what the kubelet gives a pod to reach the API server, with the
// service account mount's directory standing in for the mount itself.
func (k *Server) Env() map[string]string {
	u, _ := url.Parse(k.srv.URL)
	host, port, _ := net.SplitHostPort(u.Host)
	return map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "READSYNC_SERVICEACCOUNT_DIR": k.Dir}
}

// RotateToken replaces the token, in the mount and on the server, as the
// kubelet and the API server do before a projected token expires.
func (k *Server) RotateToken(t testing.TB, token string) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.token = token
	if err := os.WriteFile(filepath.Join(k.Dir, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Allow makes the server authorize requests by the role's rules alone.
func (k *Server) Allow(role *rbacv1.Role) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rules = role.DeepCopy().Rules
}

// Apply stores the StatefulSet as `kubectl apply` or `helm upgrade` would
// leave it: its spec as given, in the server's namespace, with the
// metadata and status the server maintains.
func (k *Server) Apply(s *appsv1.StatefulSet) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s = s.DeepCopy()
	s.APIVersion, s.Kind = "apps/v1", "StatefulSet"
	s.Namespace = k.namespace
	if old, ok := k.sets[s.Name]; ok {
		s.UID, s.Generation, s.ResourceVersion = old.UID, old.Generation+1, old.ResourceVersion+"1"
	} else {
		s.UID, s.Generation, s.ResourceVersion = "5b1e4d9c-0000-4000-8000-000000000001", 1, "1"
	}
	if s.Spec.Replicas == nil {
		one := int32(1) // the API server's default
		s.Spec.Replicas = &one
	}
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: *s.Spec.Replicas}
	k.sets[s.Name] = s
}

// Scale sets spec.replicas alone, as `kubectl scale`, `kubectl edit` and
// a HorizontalPodAutoscaler (through the scale subresource) do.
func (k *Server) Scale(name string, n int32) {
	k.mu.Lock()
	s := k.sets[name].DeepCopy()
	k.mu.Unlock()
	s.Spec.Replicas = &n
	k.Apply(s)
}

// Get returns the StatefulSet name as the server holds it, nil when it holds none.
func (k *Server) Get(name string) *appsv1.StatefulSet {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sets[name].DeepCopy()
}

// Seen returns the method and path of each request served, in order.
func (k *Server) Seen() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.requests...)
}

func (k *Server) serve(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests = append(k.requests, r.Method+" "+r.URL.Path)
	status := func(code int, reason metav1.StatusReason, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
		})
	}
	if r.Header.Get("Authorization") != "Bearer "+k.token {
		status(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		return
	}
	prefix := "/apis/apps/v1/namespaces/" + k.namespace + "/statefulsets/"
	name, ok := strings.CutPrefix(r.URL.Path, prefix)
	verb := map[string]string{http.MethodGet: "get"}[r.Method]
	if r.URL.Query().Get("watch") == "true" {
		verb = "watch"
	}
	if !ok || name == "" || strings.Contains(name, "/") || verb == "" {
		status(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		return
	}
	if !k.allowed(verb, name) {
		status(http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf(
			`statefulsets.apps %q is forbidden: User "system:serviceaccount:%s:readsync" cannot %s resource "statefulsets" in API group "apps" in the namespace %q`,
			name, k.namespace, verb, k.namespace))
		return
	}
	s, ok := k.sets[name]
	if !ok {
		status(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("statefulsets.apps %q not found", name))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s)
}

// allowed is RBAC's rule check for the one resource readsync reads.
func (k *Server) allowed(verb, name string) bool {
	has := func(list []string, v string) bool {
		for _, x := range list {
			if x == v || x == "*" {
				return true
			}
		}
		return false
	}
	for _, r := range k.rules {
		if has(r.APIGroups, "apps") && has(r.Resources, "statefulsets") && has(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || has(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// GetStatefulSet is the Role the manifests give: get on one StatefulSet.
func GetStatefulSet(name string) *rbacv1.Role {
	return &rbacv1.Role{Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, ResourceNames: []string{name}, Verbs: []string{"get"},
	}}}
}

// TLS is the server's TLS configuration, for a test server that must
// present the same certificate.
func (k *Server) TLS() *tls.Config { return k.srv.TLS }
