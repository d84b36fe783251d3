package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	gosync "sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeKube is the Kubernetes API server as readsync sees it: over TLS, to
// a bearer token, it serves the StatefulSets of one namespace as the API
// server does, as JSON of the k8s.io/api types, and authorizes each
// request by the rules of the Role it was given. Like httptest.Server, it
// is started by newFakeKube and closed (waiting for its handlers) by the
// test's cleanup.
type fakeKube struct {
	srv       *httptest.Server
	namespace string
	// dir is the service account mount a pod would have: token, ca.crt
	// and namespace.
	dir string

	mu       gosync.Mutex
	token    string
	sets     map[string]*appsv1.StatefulSet
	rules    []rbacv1.PolicyRule
	requests []string // method and path of each request, in order
}

func newFakeKube(t *testing.T, namespace string) *fakeKube {
	t.Helper()
	k := &fakeKube{namespace: namespace, dir: t.TempDir(), token: "sa-token-1", sets: map[string]*appsv1.StatefulSet{}}
	k.srv = httptest.NewUnstartedServer(http.HandlerFunc(k.serve))
	// A client that refuses the certificate is a case under test, not news.
	k.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	k.srv.StartTLS()
	t.Cleanup(k.srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.srv.Certificate().Raw})
	for name, content := range map[string][]byte{"ca.crt": ca, "namespace": []byte(namespace), "token": []byte(k.token)} {
		if err := os.WriteFile(filepath.Join(k.dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// env is what the kubelet gives a pod to reach the API server, with the
// service account mount's directory standing in for the mount itself.
func (k *fakeKube) env() map[string]string {
	u, _ := url.Parse(k.srv.URL)
	host, port, _ := net.SplitHostPort(u.Host)
	return map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "READSYNC_SERVICEACCOUNT_DIR": k.dir}
}

// rotateToken replaces the token, in the mount and on the server, as the
// kubelet and the API server do before a projected token expires.
func (k *fakeKube) rotateToken(t *testing.T, token string) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.token = token
	if err := os.WriteFile(filepath.Join(k.dir, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
}

// allow makes the server authorize requests by the role's rules alone.
func (k *fakeKube) allow(role *rbacv1.Role) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rules = role.DeepCopy().Rules
}

// apply stores the StatefulSet as `kubectl apply` or `helm upgrade` would
// leave it: its spec as given, in the server's namespace, with the
// metadata and status the server maintains.
func (k *fakeKube) apply(s *appsv1.StatefulSet) {
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

// scale sets spec.replicas alone, as `kubectl scale`, `kubectl edit` and
// a HorizontalPodAutoscaler (through the scale subresource) do.
func (k *fakeKube) scale(name string, n int32) {
	k.mu.Lock()
	s := k.sets[name].DeepCopy()
	k.mu.Unlock()
	s.Spec.Replicas = &n
	k.apply(s)
}

func (k *fakeKube) get(name string) *appsv1.StatefulSet {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sets[name].DeepCopy()
}

func (k *fakeKube) seen() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.requests...)
}

func (k *fakeKube) serve(w http.ResponseWriter, r *http.Request) {
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
func (k *fakeKube) allowed(verb, name string) bool {
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

// getStatefulSet is the Role the manifests give: get on one StatefulSet.
func getStatefulSet(name string) *rbacv1.Role {
	return &rbacv1.Role{Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, ResourceNames: []string{name}, Verbs: []string{"get"},
	}}}
}

// selfSignedPEM is a CA certificate that signed nothing the tests serve.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another cluster's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newTestKubeAPI(t *testing.T, k *fakeKube) *kubeAPI {
	t.Helper()
	env := k.env()
	api, err := newKubeAPI(env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"], k.dir)
	if err != nil {
		t.Fatal(err)
	}
	return api
}

func TestKubeAPIReadsReplicas(t *testing.T) {
	k := newFakeKube(t, "team-a")
	k.allow(getStatefulSet("readsync"))
	three := int32(3)
	k.apply(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "readsync"}, Spec: appsv1.StatefulSetSpec{Replicas: &three}})
	api := newTestKubeAPI(t, k)
	ctx := context.Background()
	if n, err := api.replicas(ctx, "readsync"); n != 3 || err != nil {
		t.Fatalf("replicas = %d, %v; want 3", n, err)
	}
	if got, want := k.seen(), []string{"GET /apis/apps/v1/namespaces/team-a/statefulsets/readsync"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("requests %q, want %q", got, want)
	}
	// The kubelet replaces the token before it expires; the next read
	// sends the new one.
	k.rotateToken(t, "sa-token-2")
	k.scale("readsync", 5)
	if n, err := api.replicas(ctx, "readsync"); n != 5 || err != nil {
		t.Fatalf("after the token's rotation: replicas = %d, %v; want 5", n, err)
	}
}

func TestKubeAPIErrors(t *testing.T) {
	k := newFakeKube(t, "team-a")
	role := getStatefulSet("readsync")
	// The API server checks RBAC before it looks for the object.
	role.Rules[0].ResourceNames = append(role.Rules[0].ResourceNames, "missing")
	k.allow(role)
	k.apply(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "readsync"}})
	k.apply(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "other"}})
	api := newTestKubeAPI(t, k)
	ctx := context.Background()
	for _, tt := range []struct {
		set       string
		code      int
		permanent bool
		want      string
	}{
		{"other", 403, true, `HTTP 403 Forbidden: statefulsets.apps "other" is forbidden`},
		{"missing", 404, true, `HTTP 404 Not Found: statefulsets.apps "missing" not found`},
	} {
		_, err := api.replicas(ctx, tt.set)
		var se *kubeStatusError
		if !errors.As(err, &se) || se.Code != tt.code || permanent(err) != tt.permanent || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("StatefulSet %s: error %v, want HTTP %d containing %q, permanent %t", tt.set, err, tt.code, tt.want, tt.permanent)
		}
		if strings.Contains(err.Error(), "sa-token") {
			t.Errorf("StatefulSet %s: the error quotes the token: %v", tt.set, err)
		}
	}
	k.rotateToken(t, "sa-token-2")
	os.WriteFile(filepath.Join(k.dir, "token"), []byte("stale"), 0o600)
	if _, err := api.replicas(ctx, "readsync"); !permanent(err) || !strings.Contains(err.Error(), "HTTP 401") || strings.Contains(err.Error(), "stale") {
		t.Errorf("a refused token: error %v, want a permanent HTTP 401 that does not quote it", err)
	}
}

// The token goes to the API server's origin only: a redirect elsewhere is
// not followed, so the other server never sees it.
func TestKubeAPIRefusesRedirects(t *testing.T) {
	var leaked gosync.Map
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization"), true)
	}))
	t.Cleanup(other.Close)
	k := newFakeKube(t, "team-a")
	redirect := httptest.NewUnstartedServer(http.RedirectHandler(other.URL+"/apis", http.StatusFound))
	redirect.TLS = k.srv.TLS
	redirect.StartTLS()
	t.Cleanup(redirect.Close)
	u, _ := url.Parse(redirect.URL)
	host, port, _ := net.SplitHostPort(u.Host)
	api, err := newKubeAPI(host, port, k.dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.replicas(context.Background(), "readsync")
	if err == nil || !strings.Contains(err.Error(), "HTTP 302") {
		t.Errorf("a redirect: error %v, want HTTP 302", err)
	}
	leaked.Range(func(k, _ any) bool {
		t.Errorf("the redirect's target received Authorization %q", k)
		return true
	})
}

func TestKubeAPIChecksTheServer(t *testing.T) {
	k := newFakeKube(t, "team-a")
	k.allow(getStatefulSet("readsync"))
	k.apply(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "readsync"}})
	// A mount whose CA did not sign the server's certificate: the
	// connection fails before any request, token included, is sent.
	other := t.TempDir()
	for _, f := range []string{"namespace", "token"} {
		b, _ := os.ReadFile(filepath.Join(k.dir, f))
		os.WriteFile(filepath.Join(other, f), b, 0o600)
	}
	os.WriteFile(filepath.Join(other, "ca.crt"), selfSignedPEM(t), 0o600)
	env := k.env()
	host, port := env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]
	api, err := newKubeAPI(host, port, other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.replicas(context.Background(), "readsync"); err == nil || permanent(err) {
		t.Errorf("a server the CA did not sign: error %v, want a failure to wait out", err)
	}
	if n := len(k.seen()); n != 0 {
		t.Errorf("the server got %d requests over a connection the CA did not verify", n)
	}

	// A mount without a CA or a namespace is a configuration error.
	for _, missing := range []string{"ca.crt", "namespace", "token"} {
		dir := t.TempDir()
		for _, f := range []string{"ca.crt", "namespace", "token"} {
			if f != missing {
				b, _ := os.ReadFile(filepath.Join(k.dir, f))
				os.WriteFile(filepath.Join(dir, f), b, 0o600)
			}
		}
		_, err := newKubeAPI(host, port, dir)
		var ce *kubeConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "READSYNC_SERVICEACCOUNT_DIR") || !strings.Contains(err.Error(), missing) {
			t.Errorf("no %s: error %v, want a configuration error naming READSYNC_SERVICEACCOUNT_DIR and the file", missing, err)
		}
	}
	if _, err := newKubeAPI("", strconv.Itoa(443), k.dir); err == nil {
		t.Errorf("no KUBERNETES_SERVICE_HOST: no error")
	}
}
