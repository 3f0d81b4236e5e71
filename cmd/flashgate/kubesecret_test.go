package main

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/keys"
)

// fakeSecretsAPI is the Secrets part of a Kubernetes API server: one
// namespace, bearer token checked, resourceVersion bumped on every write and
// compared on update (409 Conflict on a stale one), as the real one does.
type fakeSecretsAPI struct {
	mu        sync.Mutex
	secrets   map[string]map[string]any
	rv        int
	writes    int
	beforePut func() // runs before a PUT is applied: a concurrent writer
}

func (f *fakeSecretsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer sa-token" {
		http.Error(w, `{"message":"Unauthorized"}`, http.StatusUnauthorized)
		return
	}
	const prefix = "/api/v1/namespaces/shop/secrets"
	name := ""
	switch {
	case r.URL.Path == prefix:
	case filepath.Dir(r.URL.Path) == prefix:
		name = filepath.Base(r.URL.Path)
	default:
		http.Error(w, `{"message":"no such path"}`, http.StatusNotFound)
		return
	}
	reply := func(code int, obj any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(obj)
	}
	var body map[string]any
	if r.Body != nil && r.Method != http.MethodGet {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			reply(http.StatusBadRequest, map[string]string{"message": err.Error()})
			return
		}
	}
	meta := func(o map[string]any) map[string]any { m, _ := o["metadata"].(map[string]any); return m }
	// save stores body as secret n with the next resourceVersion.
	save := func(n string, code int) {
		f.rv++
		f.writes++
		meta(body)["resourceVersion"] = strconv.Itoa(f.rv)
		f.secrets[n] = body
		reply(code, body)
	}
	switch r.Method {
	case http.MethodGet:
		s, ok := f.secrets[name]
		if !ok {
			reply(http.StatusNotFound, map[string]string{"message": `secrets "` + name + `" not found`})
			return
		}
		reply(http.StatusOK, s)
	case http.MethodPost:
		n, _ := meta(body)["name"].(string)
		if _, ok := f.secrets[n]; ok {
			reply(http.StatusConflict, map[string]string{"message": "already exists"})
			return
		}
		save(n, http.StatusCreated)
	case http.MethodPut:
		if f.beforePut != nil {
			f.beforePut()
		}
		cur, ok := f.secrets[name]
		if !ok {
			reply(http.StatusNotFound, map[string]string{"message": "not found"})
			return
		}
		if meta(body)["resourceVersion"] != meta(cur)["resourceVersion"] {
			reply(http.StatusConflict, map[string]string{"message": "the object has been modified"})
			return
		}
		save(name, http.StatusOK)
	default:
		reply(http.StatusMethodNotAllowed, map[string]string{"message": r.Method})
	}
}

func (f *fakeSecretsAPI) ring(t *testing.T, name string) *keys.Ring {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	data, _ := f.secrets[name]["data"].(map[string]any)
	s, _ := data["flashgate-keys.json"].(string)
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	r, err := keys.ParsePrivate(b)
	require.NoError(t, err)
	return r
}

// inPod points the in-cluster configuration at api: its address as
// KUBERNETES_SERVICE_HOST/PORT, a service account directory with a token,
// the server's CA and namespace "shop".
func inPod(t *testing.T, api *httptest.Server) {
	t.Helper()
	host, port, err := net.SplitHostPort(api.Listener.Addr().String())
	require.NoError(t, err)
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})
	for f, v := range map[string][]byte{"token": []byte("sa-token\n"), "ca.crt": ca, "namespace": []byte("shop")} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), v, 0o600))
	}
	old := serviceAccountDir
	serviceAccountDir = dir
	t.Cleanup(func() { serviceAccountDir = old })
}

func TestKeysInKubernetesSecret(t *testing.T) {
	fake := &fakeSecretsAPI{secrets: map[string]map[string]any{}}
	api := httptest.NewTLSServer(fake)
	defer api.Close()
	inPod(t, api)

	r := runCLI(t, "", "keys", "rotate", "-kubernetes-secret", "fg-keys")
	assert.Equal(t, exitFailure, r.code, "nothing to rotate yet")
	assert.Contains(t, r.stderr, "no key ring")

	r = runCLI(t, "", "keys", "generate", "-kubernetes-secret", "fg-keys")
	require.Equal(t, exitOK, r.code, r.stderr)
	first := fake.ring(t, "fg-keys")
	assert.Contains(t, r.stdout, first.ActiveKeyID())
	assert.Equal(t, 1, fake.writes)

	// Again (an install hook on every upgrade): the ring stays.
	r = runCLI(t, "", "keys", "generate", "-kubernetes-secret", "shop/fg-keys")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "left unchanged")
	assert.Equal(t, 1, fake.writes)
	assert.Equal(t, first.ActiveKeyID(), fake.ring(t, "fg-keys").ActiveKeyID())

	r = runCLI(t, "", "keys", "rotate", "-kubernetes-secret", "fg-keys")
	require.Equal(t, exitOK, r.code, r.stderr)
	rotated := fake.ring(t, "fg-keys")
	next := ""
	for _, k := range first.Keys() {
		if k.Status == keys.StatusNext {
			next = k.ID
		}
	}
	assert.Equal(t, next, rotated.ActiveKeyID(), "the published next key signs now")
	assert.Len(t, rotated.Keys(), 3, "active, next and the retired one")
	meta := fake.secrets["fg-keys"]["metadata"].(map[string]any)
	assert.Equal(t, "flashgate", meta["labels"].(map[string]any)["app.kubernetes.io/name"], "labels survive the update")

	// A write between our read and our update is not overwritten.
	fake.beforePut = func() {
		fake.rv++
		fake.secrets["fg-keys"]["metadata"].(map[string]any)["resourceVersion"] = strconv.Itoa(fake.rv)
	}
	r = runCLI(t, "", "keys", "rotate", "-kubernetes-secret", "fg-keys")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "409 Conflict")
	assert.Equal(t, rotated.ActiveKeyID(), fake.ring(t, "fg-keys").ActiveKeyID())
}

func TestKeysInKubernetesSecretOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	r := runCLI(t, "", "keys", "rotate", "-kubernetes-secret", "fg-keys")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "inside a Kubernetes pod only")
}

// TestKeysRotateMinKeyAge: with -min-key-age, a rotation happens once per
// period whatever the retries: the first rotates a ring whose next key is
// old enough, a second (a Job's retry, a second release sharing the
// Secret) finds the fresh next key the first created and changes nothing,
// exit 0. The same for a file. (Before: every run rotated, so a retry
// activated a key no verifier had fetched yet.)
func TestKeysRotateMinKeyAge(t *testing.T) {
	old, err := keys.Generate(time.Now().Add(-2 * time.Hour))
	require.NoError(t, err)
	data, err := old.MarshalPrivate()
	require.NoError(t, err)
	var next string
	for _, k := range old.Keys() {
		if k.Status == keys.StatusNext {
			next = k.ID
		}
	}

	fake := &fakeSecretsAPI{secrets: map[string]map[string]any{}}
	api := httptest.NewTLSServer(fake)
	defer api.Close()
	inPod(t, api)
	require.Equal(t, exitOK, runCLI(t, "", "keys", "generate", "-kubernetes-secret", "fg-keys").code)
	fake.mu.Lock()
	fake.secrets["fg-keys"]["data"].(map[string]any)["flashgate-keys.json"] = base64.StdEncoding.EncodeToString(data)
	fake.mu.Unlock()

	r := runCLI(t, "", "keys", "rotate", "-kubernetes-secret", "fg-keys", "-min-key-age", "1h")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, next, fake.ring(t, "fg-keys").ActiveKeyID(), "the hour-old next key signs")
	writes := fake.writes
	for range 3 {
		r = runCLI(t, "", "keys", "rotate", "-kubernetes-secret", "fg-keys", "-min-key-age", "1h")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "not rotated")
	}
	assert.Equal(t, writes, fake.writes, "no second rotation within -min-key-age")
	assert.Equal(t, next, fake.ring(t, "fg-keys").ActiveKeyID())

	file := filepath.Join(t.TempDir(), "keys.json")
	require.NoError(t, old.Save(file))
	require.Equal(t, exitOK, runCLI(t, "", "keys", "rotate", "-file", file, "-min-key-age", "1h").code)
	r = runCLI(t, "", "keys", "rotate", "-file", file, "-min-key-age", "1h")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "not rotated")
	ring, err := keys.Load(file)
	require.NoError(t, err)
	assert.Equal(t, next, ring.ActiveKeyID())
	assert.Len(t, ring.Keys(), 3, "one rotation: active, next and one retired")
	assert.Equal(t, exitFailure, runCLI(t, "", "keys", "rotate", "-file", file, "-min-key-age", "-1h").code)
}

// TestKeysAdminTokenInKubernetesSecret: generate -admin-token-key adds a
// random admin token to the ring's Secret once, and never changes it: run
// again (the install hook on every upgrade or GitOps sync) it writes
// nothing; a Secret with a ring and no token (an older release) gains one
// and keeps its ring.
func TestKeysAdminTokenInKubernetesSecret(t *testing.T) {
	fake := &fakeSecretsAPI{secrets: map[string]map[string]any{}}
	api := httptest.NewTLSServer(fake)
	defer api.Close()
	inPod(t, api)
	token := func() string {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		s, _ := fake.secrets["fg-keys"]["data"].(map[string]any)["FLASHGATE_ADMIN_TOKEN"].(string)
		b, err := base64.StdEncoding.DecodeString(s)
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, exitOK, runCLI(t, "", "keys", "generate", "-kubernetes-secret", "fg-keys").code)
	ring := fake.ring(t, "fg-keys").ActiveKeyID()
	assert.Empty(t, token())

	r := runCLI(t, "", "keys", "generate", "-kubernetes-secret", "fg-keys", "-admin-token-key", "FLASHGATE_ADMIN_TOKEN")
	require.Equal(t, exitOK, r.code, r.stderr)
	tok := token()
	assert.GreaterOrEqual(t, len(tok), 40)
	assert.Equal(t, ring, fake.ring(t, "fg-keys").ActiveKeyID(), "the ring is kept")
	writes := fake.writes
	for range 2 {
		r = runCLI(t, "", "keys", "generate", "-kubernetes-secret", "fg-keys", "-admin-token-key", "FLASHGATE_ADMIN_TOKEN")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "left unchanged")
	}
	assert.Equal(t, writes, fake.writes)
	assert.Equal(t, tok, token())
	// A rotation keeps the token.
	require.Equal(t, exitOK, runCLI(t, "", "keys", "rotate", "-kubernetes-secret", "fg-keys").code)
	assert.Equal(t, tok, token())
	assert.Equal(t, exitFailure, runCLI(t, "", "keys", "generate", "-file", filepath.Join(t.TempDir(), "k.json"),
		"-admin-token-key", "X").code)
}

// TestKeysLotteryKeyInKubernetesSecret: generate -lottery-key-key adds one
// random 32-byte lottery key (the FLASHGATE_LOTTERY_KEY every replica reads,
// so all derive the same lottery secrets) to the ring's Secret, beside the
// admin token, and never changes it on later runs.
func TestKeysLotteryKeyInKubernetesSecret(t *testing.T) {
	fake := &fakeSecretsAPI{secrets: map[string]map[string]any{}}
	api := httptest.NewTLSServer(fake)
	defer api.Close()
	inPod(t, api)
	value := func(k string) string {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		s, _ := fake.secrets["fg-keys"]["data"].(map[string]any)[k].(string)
		b, err := base64.StdEncoding.DecodeString(s)
		require.NoError(t, err)
		return string(b)
	}
	args := []string{"keys", "generate", "-kubernetes-secret", "fg-keys", "-admin-token-key", "FLASHGATE_ADMIN_TOKEN",
		"-lottery-key-key", "FLASHGATE_LOTTERY_KEY"}
	r := runCLI(t, "", args...)
	require.Equal(t, exitOK, r.code, r.stderr)
	key := value("FLASHGATE_LOTTERY_KEY")
	raw, err := base64.StdEncoding.DecodeString(key)
	require.NoError(t, err, "FLASHGATE_LOTTERY_KEY is standard base64, as serve reads it")
	assert.Len(t, raw, 32)
	assert.NotEmpty(t, value("FLASHGATE_ADMIN_TOKEN"))
	r = runCLI(t, "", args...)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "left unchanged")
	assert.Equal(t, key, value("FLASHGATE_LOTTERY_KEY"), "never changed: a new key would re-roll every lottery")
	assert.Equal(t, exitFailure, runCLI(t, "", "keys", "generate", "-file", filepath.Join(t.TempDir(), "k.json"),
		"-lottery-key-key", "X").code)
}
