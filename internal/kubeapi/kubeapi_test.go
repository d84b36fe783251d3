package kubeapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readsync/readsync/internal/kubeapi"
	"github.com/readsync/readsync/internal/kubeapi/kubeapitest"
)

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

func newTestKubeAPI(t *testing.T, k *kubeapitest.Server) *kubeapi.Client {
	t.Helper()
	env := k.Env()
	api, err := kubeapi.New(env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"], k.Dir, "readsync/test")
	if err != nil {
		t.Fatal(err)
	}
	return api
}

func TestKubeAPIReadsReplicas(t *testing.T) {
	k := kubeapitest.NewServer(t, "team-a")
	k.Allow(kubeapitest.GetStatefulSet("readsync"))
	three := int32(3)
	k.Apply(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "readsync"}, Spec: appsv1.StatefulSetSpec{Replicas: &three}})
	api := newTestKubeAPI(t, k)
	ctx := context.Background()
	if n, err := api.Replicas(ctx, "readsync"); n != 3 || err != nil {
		t.Fatalf("replicas = %d, %v; want 3", n, err)
	}
	if got, want := k.Seen(), []string{"GET /apis/apps/v1/namespaces/team-a/statefulsets/readsync"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("requests %q, want %q", got, want)
	}
	// The kubelet replaces the token before it expires; the next read
	// sends the new one.
	k.RotateToken(t, "sa-token-2")
	k.Scale("readsync", 5)
	if n, err := api.Replicas(ctx, "readsync"); n != 5 || err != nil {
		t.Fatalf("after the token's rotation: replicas = %d, %v; want 5", n, err)
	}
}

func TestKubeAPIErrors(t *testing.T) {
	k := kubeapitest.NewServer(t, "team-a")
	role := kubeapitest.GetStatefulSet("readsync")
	// The API server checks RBAC before it looks for the object.
	role.Rules[0].ResourceNames = append(role.Rules[0].ResourceNames, "missing")
	k.Allow(role)
	k.Apply(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "readsync"}})
	k.Apply(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "other"}})
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
		_, err := api.Replicas(ctx, tt.set)
		var se *kubeapi.StatusError
		if !errors.As(err, &se) || se.Code != tt.code || kubeapi.Permanent(err) != tt.permanent || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("StatefulSet %s: error %v, want HTTP %d containing %q, permanent %t", tt.set, err, tt.code, tt.want, tt.permanent)
		}
		if strings.Contains(err.Error(), "sa-token") {
			t.Errorf("StatefulSet %s: the error quotes the token: %v", tt.set, err)
		}
	}
	k.RotateToken(t, "sa-token-2")
	os.WriteFile(filepath.Join(k.Dir, "token"), []byte("stale"), 0o600)
	if _, err := api.Replicas(ctx, "readsync"); !kubeapi.Permanent(err) || !strings.Contains(err.Error(), "HTTP 401") || strings.Contains(err.Error(), "stale") {
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
	k := kubeapitest.NewServer(t, "team-a")
	redirect := httptest.NewUnstartedServer(http.RedirectHandler(other.URL+"/apis", http.StatusFound))
	redirect.TLS = k.TLS()
	redirect.StartTLS()
	t.Cleanup(redirect.Close)
	u, _ := url.Parse(redirect.URL)
	host, port, _ := net.SplitHostPort(u.Host)
	api, err := kubeapi.New(host, port, k.Dir, "readsync/test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.Replicas(context.Background(), "readsync")
	if err == nil || !strings.Contains(err.Error(), "HTTP 302") {
		t.Errorf("a redirect: error %v, want HTTP 302", err)
	}
	leaked.Range(func(k, _ any) bool {
		t.Errorf("the redirect's target received Authorization %q", k)
		return true
	})
}

func TestKubeAPIChecksTheServer(t *testing.T) {
	k := kubeapitest.NewServer(t, "team-a")
	k.Allow(kubeapitest.GetStatefulSet("readsync"))
	k.Apply(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "readsync"}})
	// A mount whose CA did not sign the server's certificate: the
	// connection fails before any request, token included, is sent.
	other := t.TempDir()
	for _, f := range []string{"namespace", "token"} {
		b, _ := os.ReadFile(filepath.Join(k.Dir, f))
		os.WriteFile(filepath.Join(other, f), b, 0o600)
	}
	os.WriteFile(filepath.Join(other, "ca.crt"), selfSignedPEM(t), 0o600)
	env := k.Env()
	host, port := env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]
	api, err := kubeapi.New(host, port, other, "readsync/test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Replicas(context.Background(), "readsync"); err == nil || kubeapi.Permanent(err) {
		t.Errorf("a server the CA did not sign: error %v, want a failure to wait out", err)
	}
	if n := len(k.Seen()); n != 0 {
		t.Errorf("the server got %d requests over a connection the CA did not verify", n)
	}

	// A mount without a CA or a namespace is a configuration error.
	for _, missing := range []string{"ca.crt", "namespace", "token"} {
		dir := t.TempDir()
		for _, f := range []string{"ca.crt", "namespace", "token"} {
			if f != missing {
				b, _ := os.ReadFile(filepath.Join(k.Dir, f))
				os.WriteFile(filepath.Join(dir, f), b, 0o600)
			}
		}
		_, err := kubeapi.New(host, port, dir, "readsync/test")
		var ce *kubeapi.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "READSYNC_SERVICEACCOUNT_DIR") || !strings.Contains(err.Error(), missing) {
			t.Errorf("no %s: error %v, want a configuration error naming READSYNC_SERVICEACCOUNT_DIR and the file", missing, err)
		}
	}
	if _, err := kubeapi.New("", strconv.Itoa(443), k.Dir, "readsync/test"); err == nil {
		t.Errorf("no KUBERNETES_SERVICE_HOST: no error")
	}
}
