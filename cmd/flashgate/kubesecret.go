package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
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

// serviceAccountDir is where Kubernetes mounts a pod's service account
// token, CA bundle and namespace (a variable for the tests).
var serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// errSecretNotFound is what kubeSecret.get returns for a Secret that does
// not exist.
var errSecretNotFound = errors.New("not found")

// kubeSecret reads and writes one key of one Kubernetes Secret through the
// API server with the pod's own service account (in-cluster: the
// KUBERNETES_SERVICE_HOST/PORT environment and serviceAccountDir), so that
// `flashgate keys generate|rotate -kubernetes-secret` keeps the key ring in
// a Secret the issuer pods mount read-only, with no kubectl and no key
// material on disk. The service account needs get, create and update on
// that Secret (deploy/helm/flashgate's key Role).
type kubeSecret struct {
	base, namespace, name, key, token string
	client                            *http.Client
}

// inClusterSecret returns the kubeSecret for name ("NAME", in the pod's
// namespace, or "NAMESPACE/NAME") and key. It fails outside a pod (no
// KUBERNETES_SERVICE_HOST, no service account token).
func inClusterSecret(name, key string) (*kubeSecret, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("-kubernetes-secret works inside a Kubernetes pod only (KUBERNETES_SERVICE_HOST/PORT unset)")
	}
	read := func(f string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(serviceAccountDir, f))
		if err != nil {
			return nil, fmt.Errorf("service account: %w (automountServiceAccountToken off?)", err)
		}
		return b, nil
	}
	token, err := read("token")
	if err != nil {
		return nil, err
	}
	caPEM, err := read("ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("service account: no certificate in %s", filepath.Join(serviceAccountDir, "ca.crt"))
	}
	ns, n, ok := strings.Cut(name, "/")
	if !ok {
		b, err := read("namespace")
		if err != nil {
			return nil, err
		}
		ns, n = strings.TrimSpace(string(b)), name
	}
	if ns == "" || n == "" || key == "" {
		return nil, fmt.Errorf("-kubernetes-secret %q: want NAME or NAMESPACE/NAME and a key", name)
	}
	return &kubeSecret{
		base:      "https://" + net.JoinHostPort(host, port),
		namespace: ns, name: n, key: key, token: strings.TrimSpace(string(token)),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}},
	}, nil
}

func (k *kubeSecret) String() string { return "secret " + k.namespace + "/" + k.name + " key " + k.key }

// do sends one API request; a status other than want is an error carrying
// the API server's message (with errSecretNotFound for 404).
func (k *kubeSecret) do(ctx context.Context, method, path string, body any, want int) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	if resp.StatusCode == want {
		return data, nil
	}
	var status struct{ Message string }
	_ = json.Unmarshal(data, &status)
	err = fmt.Errorf("%s: %s %s: %s: %s", k, method, path, resp.Status, status.Message)
	if resp.StatusCode == http.StatusNotFound {
		err = fmt.Errorf("%w: %w", errSecretNotFound, err)
	}
	return nil, err
}

func (k *kubeSecret) path() string {
	return "/api/v1/namespaces/" + url.PathEscape(k.namespace) + "/secrets"
}

// get returns the Secret (as the API server sent it) and its key's value,
// nil when the key is absent. A missing Secret is errSecretNotFound.
func (k *kubeSecret) get(ctx context.Context) (map[string]any, []byte, error) {
	data, err := k.do(ctx, http.MethodGet, k.path()+"/"+url.PathEscape(k.name), nil, http.StatusOK)
	if err != nil {
		return nil, nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", k, err)
	}
	m, _ := obj["data"].(map[string]any)
	s, ok := m[k.key].(string)
	if !ok {
		return obj, nil, nil
	}
	v, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", k, err)
	}
	return obj, v, nil
}

// create creates the Secret holding value under the key, and extra's
// values under theirs; one that exists already is an error wrapping
// os.ErrExist (409 from the API server).
func (k *kubeSecret) create(ctx context.Context, value []byte, extra map[string][]byte) error {
	data := map[string]string{k.key: base64.StdEncoding.EncodeToString(value)}
	for ek, ev := range extra {
		data[ek] = base64.StdEncoding.EncodeToString(ev)
	}
	obj := map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": map[string]any{"name": k.name, "namespace": k.namespace,
			"labels": map[string]string{"app.kubernetes.io/name": "flashgate", "app.kubernetes.io/component": "keys"}},
		"data": data,
	}
	_, err := k.do(ctx, http.MethodPost, k.path(), obj, http.StatusCreated)
	if err != nil && strings.Contains(err.Error(), "409 Conflict") {
		return fmt.Errorf("%w: %w", os.ErrExist, err)
	}
	return err
}

// update writes value under the key of obj (a Secret get returned, its
// resourceVersion included, so a concurrent change in between is refused
// with 409 Conflict rather than overwritten), and extra's values under
// theirs; the Secret's other keys are kept.
func (k *kubeSecret) update(ctx context.Context, obj map[string]any, value []byte, extra map[string][]byte) error {
	m, _ := obj["data"].(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	m[k.key] = base64.StdEncoding.EncodeToString(value)
	for ek, ev := range extra {
		m[ek] = base64.StdEncoding.EncodeToString(ev)
	}
	obj["data"] = m
	_, err := k.do(ctx, http.MethodPut, k.path()+"/"+url.PathEscape(k.name), obj, http.StatusOK)
	return err
}

// has reports whether obj (a Secret get returned) holds key.
func has(obj map[string]any, key string) bool {
	m, _ := obj["data"].(map[string]any)
	_, ok := m[key]
	return ok
}
