package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// kubeAPI reads StatefulSets from the Kubernetes API server the way an
// in-cluster client does: the server's address from KUBERNETES_SERVICE_HOST
// and KUBERNETES_SERVICE_PORT, and the CA certificate, namespace and token
// from the pod's service account mount. It makes one kind of request, a
// GET of a StatefulSet in the pod's namespace.
//
// The token is a secret: it goes in the Authorization header to the API
// server's origin and nowhere else. Redirects are not followed, no proxy is
// used, and neither errors nor logs quote it. It is read from its file
// before each request, since the kubelet replaces a projected token before
// it expires.
type kubeAPI struct {
	base      *url.URL
	namespace string
	tokenFile string
	client    *http.Client
}

// kubeConfigError is a service account mount or API address readsync
// cannot use: a configuration error, not an outage.
type kubeConfigError struct{ err error }

func (e *kubeConfigError) Error() string { return e.err.Error() }
func (e *kubeConfigError) Unwrap() error { return e.err }

// kubeStatusError is an answer of the API server other than 200.
type kubeStatusError struct {
	Code    int
	Message string // the API server's Status message, when it sent one
}

func (e *kubeStatusError) Error() string {
	msg := fmt.Sprintf("HTTP %d %s", e.Code, http.StatusText(e.Code))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch e.Code {
	case http.StatusUnauthorized:
		msg += " (the service account token was refused)"
	case http.StatusForbidden:
		msg += " (the pod's service account needs get on this StatefulSet: see the Role readsync)"
	}
	return msg
}

// newKubeAPI prepares a client for the API server at host:port with the
// service account mounted in dir. It reads the CA and the namespace, which
// are fixed for the pod's life, and checks that the token is readable.
func newKubeAPI(host, port, dir string) (*kubeAPI, error) {
	fail := func(format string, args ...any) (*kubeAPI, error) {
		return nil, &kubeConfigError{fmt.Errorf(format, args...)}
	}
	if host == "" || port == "" {
		return fail("KUBERNETES_SERVICE_HOST=%q and KUBERNETES_SERVICE_PORT=%q: both are needed to reach the API server, and Kubernetes sets them in every pod", host, port)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return fail("READSYNC_SERVICEACCOUNT_DIR: %w (the pod needs automountServiceAccountToken: true)", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fail("READSYNC_SERVICEACCOUNT_DIR: %s: no PEM certificate in it", filepath.Join(dir, "ca.crt"))
	}
	ns, err := os.ReadFile(filepath.Join(dir, "namespace"))
	if err != nil {
		return fail("READSYNC_SERVICEACCOUNT_DIR: %w", err)
	}
	namespace := strings.TrimSpace(string(ns))
	if namespace == "" {
		return fail("READSYNC_SERVICEACCOUNT_DIR: %s is empty, want the pod's namespace", filepath.Join(dir, "namespace"))
	}
	tokenFile := filepath.Join(dir, "token")
	if _, err := readToken(tokenFile); err != nil {
		return nil, &kubeConfigError{err}
	}
	transport := &http.Transport{
		// The API server is in the cluster; a proxy from the environment
		// would see the token.
		Proxy:               nil,
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &kubeAPI{
		base:      &url.URL{Scheme: "https", Host: net.JoinHostPort(host, port)},
		namespace: namespace,
		tokenFile: tokenFile,
		client: &http.Client{
			Transport: transport,
			// A redirect would carry the token elsewhere; the API server
			// answers a GET of an object without one.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// readToken reads the service account token; its errors name the file,
// never the content.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("READSYNC_SERVICEACCOUNT_DIR: service account token: %w", err)
	}
	token := string(bytes.TrimSpace(b))
	if token == "" {
		return "", fmt.Errorf("READSYNC_SERVICEACCOUNT_DIR: service account token %s is empty", file)
	}
	return token, nil
}

// statefulSetObject is the part of an apps/v1 StatefulSet readsync reads.
// Decoding into k8s.io/api's type instead would add its whole dependency
// tree to the binary for one field.
type statefulSetObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		// Replicas is a pointer in the API: unset means 1, though the API
		// server fills in that default before storing the object.
		Replicas *int32 `json:"replicas"`
	} `json:"spec"`
}

// maxKubeResponse bounds what readsync reads of an answer: a StatefulSet
// is a few kilobytes.
const maxKubeResponse = 4 << 20

// replicas returns the spec.replicas of the StatefulSet set in the pod's
// namespace.
func (k *kubeAPI) replicas(ctx context.Context, set string) (int32, error) {
	token, err := readToken(k.tokenFile)
	if err != nil {
		return 0, err
	}
	u := k.base.JoinPath("apis", "apps", "v1", "namespaces", k.namespace, "statefulsets", set)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "readsync/"+version)
	resp, err := k.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKubeResponse))
	if err != nil {
		return 0, fmt.Errorf("GET %s: reading the answer: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		var status struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &status) // the message is a courtesy; the code says enough
		return 0, fmt.Errorf("GET %s: %w", u, &kubeStatusError{Code: resp.StatusCode, Message: status.Message})
	}
	var s statefulSetObject
	if err := json.Unmarshal(body, &s); err != nil {
		return 0, fmt.Errorf("GET %s: not a StatefulSet: %w", u, err)
	}
	if s.Kind != "StatefulSet" || s.Metadata.Name != set {
		return 0, fmt.Errorf("GET %s: got %s %q, want StatefulSet %q", u, s.Kind, s.Metadata.Name, set)
	}
	n := int32(1)
	if s.Spec.Replicas != nil {
		n = *s.Spec.Replicas
	}
	if n < 0 {
		return 0, fmt.Errorf("GET %s: spec.replicas %d, want 0 or more", u, n)
	}
	return n, nil
}
