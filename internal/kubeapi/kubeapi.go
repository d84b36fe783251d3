// Package kubeapi is readsync's client of the Kubernetes API server: one
// GET of a StatefulSet in the pod's namespace, made the way an in-cluster
// client makes it, for the shard count of a StatefulSet's pod.
package kubeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
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

// Client reads StatefulSets from the Kubernetes API server the way an
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
type Client struct {
	base      *url.URL
	namespace string
	tokenFile string
	userAgent string
	client    *http.Client
}

// ConfigError is a service account mount or API address readsync
// cannot use: a configuration error, not an outage.
type ConfigError struct{ err error }

// Error is the cause, which names the variable or file to fix.
func (e *ConfigError) Error() string { return e.err.Error() }

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.err }

// StatusError is an answer of the API server other than 200.
type StatusError struct {
	Code    int
	Message string // the API server's Status message, when it sent one
}

// Error is the status, the server's message and, for 401 and 403, what
// to fix.
func (e *StatusError) Error() string {
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

// New prepares a client for the API server at host:port with the
// service account mounted in dir, which says userAgent in every request.
// It reads the CA and the namespace, which are fixed for the pod's life,
// and checks that the token is readable. Its errors are *ConfigError.
func New(host, port, dir, userAgent string) (*Client, error) {
	fail := func(format string, args ...any) (*Client, error) {
		return nil, &ConfigError{fmt.Errorf(format, args...)}
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
		return nil, &ConfigError{err}
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
	return &Client{
		base:      &url.URL{Scheme: "https", Host: net.JoinHostPort(host, port)},
		namespace: namespace,
		tokenFile: tokenFile,
		userAgent: userAgent,
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

// Replicas returns the spec.replicas of the StatefulSet set in the pod's
// namespace. An answer other than 200 is a *StatusError.
func (k *Client) Replicas(ctx context.Context, set string) (int32, error) {
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
	req.Header.Set("User-Agent", k.userAgent)
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
		return 0, fmt.Errorf("GET %s: %w", u, &StatusError{Code: resp.StatusCode, Message: status.Message})
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

// Permanent reports whether a failed request is one that waiting will not
// mend: the API server refused the token or the request, or has no such
// StatefulSet, or the mount or address cannot be used. At a daemon's
// start, that is a configuration error.
func Permanent(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code == 401 || se.Code == 403 || se.Code == 404
	}
	var ce *ConfigError
	return errors.As(err, &ce)
}
