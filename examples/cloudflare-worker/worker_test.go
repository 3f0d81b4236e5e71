package worker_test

// End-to-end test of the edge verifier: a real redis-server, the issuer HTTP
// server, a stub origin and workerd running worker.js with the
// flashgate-verifier package and the TinyGo wasm module, all on loopback.
// Tokens come from the real enter → exchange flow.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/internal/testing/wasmbuild"
	"github.com/flashgate/flashgate/internal/testing/workerdtest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/server"
)

const (
	tokenIssuer   = "flashgate"
	tokenAudience = "orders"
	waitingRoom   = "http://waiting-room.test/wait"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// workerdBinary returns the workerd executable npm installed in this folder.
func workerdBinary(t testing.TB) string { return workerdtest.Binary(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	wasmbuild.Cleanup()
	os.Exit(code)
}

// wasmModule returns the path of the built verifier module: $FLASHGATE_WASM,
// or a fresh build by scripts/build-wasm.sh (once per test binary).
func wasmModule(t testing.TB) string { return wasmbuild.Path(t) }

// origin is the stub origin: it records the headers of every request by the
// value of its "case" query parameter.
type origin struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen map[string]http.Header
	hits atomic.Int64
}

func newOrigin(t testing.TB) *origin {
	o := &origin{seen: map[string]http.Header{}}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.hits.Add(1)
		o.mu.Lock()
		o.seen[r.URL.Query().Get("case")] = r.Header.Clone()
		o.mu.Unlock()
		_, _ = io.WriteString(w, "origin ok")
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *origin) got(c string) (http.Header, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.seen[c]
	return h, ok
}

type env struct {
	t        testing.TB
	ring     *keys.Ring
	room     string
	issuer   string // issuer base URL
	worker   string // workerd base URL
	origin   *origin
	jwksGets atomic.Int64 // JWKS requests that reached the issuer
	dirGets  atomic.Int64 // directive document requests that reached the issuer
	jwks0    []byte       // the JWKS before any rotation
	client   *http.Client
	crypto   string // FLASHGATE_CRYPTO: host or pure
}

// newEnv starts the issuer, the stub origin and workerd with
// FLASHGATE_CRYPTO=crypto and FLASHGATE_DEBUG on.
func newEnv(t testing.TB, crypto string) *env {
	t.Helper()
	bin := workerdBinary(t)
	wasm := wasmModule(t)
	e := &env{t: t, crypto: crypto, client: &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{MaxIdleConnsPerHost: 16},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	t.Cleanup(e.client.CloseIdleConnections)

	// Issuer: real Redis, a fresh key ring, one room with capacity 5.
	rdb := redistest.Client(t)
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	e.ring = ring
	e.jwks0, err = ring.PublicJWKS()
	require.NoError(t, err)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, Issuer: tokenIssuer, Audience: tokenAudience,
		WaitingSecret: secret, Logger: quietLog})
	require.NoError(t, err)
	e.room = redistest.Room("edge")
	_, err = is.SetRoom(context.Background(), e.room, issuer.RoomConfig{Capacity: 5})
	require.NoError(t, err)
	srv, err := server.New(server.Options{Issuer: is, Keys: ring,
		AdminToken: "admin-secret", Logger: quietLog})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Listen(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	e.issuer = "http://" + ln.Addr().String()

	// The worker reaches the issuer through a counting proxy, so the test
	// sees how often it fetched the JWKS.
	target, _ := url.Parse(e.issuer)
	proxy := httputil.NewSingleHostReverseProxy(target)
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/jwks.json":
			e.jwksGets.Add(1)
		case "/.well-known/flashgate-directives.json":
			e.dirGets.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(counting.Close)

	e.origin = newOrigin(t)

	e.worker = startWorkerd(t, bin, wasm, strings.TrimPrefix(counting.URL, "http://"),
		strings.TrimPrefix(e.origin.srv.URL, "http://"), crypto)
	return e
}

// startWorkerd runs workerd with worker.js, the flashgate-verifier package,
// the wasm module and config.capnp.tmpl filled in (FLASHGATE_CRYPTO=crypto,
// FLASHGATE_DEBUG on), and returns its base URL once it answers.
func startWorkerd(t testing.TB, bin, wasm, issuerAddr, originAddr, crypto string) string {
	t.Helper()
	dir := t.TempDir()
	workerdtest.CopyFile(t, "worker.js", filepath.Join(dir, "worker.js"))
	workerdtest.CopyFile(t, wasm, filepath.Join(dir, "flashgate-verifier.wasm"))
	workerdtest.Package(t, dir)
	// Ready when the worker itself answers: /products/ has no product, so
	// the worker answers 404 without touching the issuer or the origin.
	wln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return workerdtest.Launch(t, bin, dir, "config.capnp.tmpl", map[string]string{
		"ISSUER_ADDR":      issuerAddr,
		"ORIGIN_ADDR":      originAddr,
		"JWKS_TTL_SECONDS": "300",
		"WAITING_ROOM_URL": waitingRoom,
		"CRYPTO":           crypto,
		"DEBUG":            "1",
	}, wln, "/products/")
}

// post sends a POST to the issuer and decodes the JSON answer.
func (e *env) post(path, user, bearer string) map[string]any {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.issuer+path, nil)
	require.NoError(e.t, err)
	req.Header.Set("X-User-ID", user)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := e.client.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(e.t, http.StatusOK, resp.StatusCode, "POST %s: %s", path, body)
	var m map[string]any
	require.NoError(e.t, json.Unmarshal(body, &m), "POST %s: %s", path, body)
	return m
}

// admit takes user through the real flow: enter (fast track → ACTIVE), then
// exchange the waiting token for an admission token.
func (e *env) admit(user string) (token, jti string) {
	e.t.Helper()
	entry := e.post("/v1/rooms/"+e.room+"/enter", user, "")
	require.Equal(e.t, "ACTIVE", entry["state"], "enter: %v", entry)
	wt, _ := entry["waiting_token"].(string)
	require.NotEmpty(e.t, wt)
	adm := e.post("/v1/rooms/"+e.room+"/exchange", user, wt)
	token, _ = adm["admission_token"].(string)
	jti, _ = adm["admission_id"].(string)
	require.NotEmpty(e.t, token)
	require.NotEmpty(e.t, jti)
	return token, jti
}

// sign signs admission-token claims with ring directly.
func sign(t testing.TB, ring *keys.Ring, user, product, jti string, iat, exp time.Time) string {
	t.Helper()
	payload, err := json.Marshal(map[string]any{"iss": tokenIssuer, "aud": tokenAudience, "sub": user,
		"product": product, "jti": jti, "iat": iat.Unix(), "exp": exp.Unix()})
	require.NoError(t, err)
	tok, err := ring.Sign(payload)
	require.NoError(t, err)
	return tok
}

func kidOf(t testing.TB, token string) string {
	t.Helper()
	h, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	require.NoError(t, err)
	var hdr struct {
		Kid string `json:"kid"`
	}
	require.NoError(t, json.Unmarshal(h, &hdr))
	return hdr.Kid
}

type result struct {
	status int
	header http.Header
	body   []byte
}

// get requests path from the worker; how is "bearer", "cookie" or "" (no token).
func (e *env) get(path, token, how, accept string, extra http.Header) result {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.worker+path, nil)
	require.NoError(e.t, err)
	for k, vs := range extra {
		req.Header[k] = vs // as spelled: the worker must match case-insensitively
	}
	switch how {
	case "bearer":
		req.Header.Set("Authorization", "Bearer "+token)
	case "cookie":
		req.Header.Set("Cookie", "theme=dark; flashgate_admission="+token+"; lang=en")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := e.client.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return result{resp.StatusCode, resp.Header, body}
}

const (
	acceptJSON    = "application/json"
	acceptBrowser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
)

// refused asserts that the request for case c was refused with reason and
// never reached the origin, both as an API client and as a browser.
func (e *env) refused(c, product, token, how string, status int, reason string) {
	t := e.t
	t.Helper()
	path := "/products/" + product + "/buy?case=" + c
	r := e.get(path, token, how, acceptJSON, nil)
	require.Equal(t, status, r.status, "%s: body %s", c, r.body)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), c)
	var p map[string]any
	require.NoError(t, json.Unmarshal(r.body, &p), "%s: %s", c, r.body)
	require.Equal(t, reason, p["reason"], "%s: %s", c, r.body)
	require.Equal(t, "https://flashgate.dev/problems/token-"+strings.ReplaceAll(reason, "_", "-"), p["type"], c)
	require.Equal(t, float64(status), p["status"], c)
	if reason != "missing" {
		require.Equal(t, e.crypto, r.header.Get("X-Flashgate-Crypto"), "%s: the signature path used", c)
	}
	// The worker answers as the Go side does: package problem's row for the
	// reason (status, title, challenge, Retry-After) is the reference.
	k := problem.Token(reason)
	require.Equal(t, k.Status, r.status, c)
	require.Equal(t, k.Title, p["title"], c)
	require.Equal(t, k.Challenge, r.header.Get("WWW-Authenticate"), c)
	if k.RetryAfter > 0 {
		require.Equal(t, strconv.Itoa(k.RetryAfter), r.header.Get("Retry-After"), c)
	}

	r = e.get(path+"-browser", token, how, acceptBrowser, nil)
	require.Equal(t, http.StatusFound, r.status, "%s (browser): body %s", c, r.body)
	loc, err := url.Parse(r.header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, waitingRoom, loc.Scheme+"://"+loc.Host+loc.Path, c)
	require.Equal(t, product, loc.Query().Get("room"), c)
	require.Equal(t, reason, loc.Query().Get("reason"), c)
	// The way back: the original request URL, query and all (URL-encoded,
	// so it is one parameter whatever it holds).
	require.Equal(t, e.worker+path+"-browser", loc.Query().Get("return"), c)
	require.Contains(t, loc.RawQuery, "return="+url.QueryEscape(e.worker+path+"-browser"), c)

	_, reached := e.origin.got(c)
	_, reachedB := e.origin.got(c + "-browser")
	require.False(t, reached || reachedB, "%s: a refused request reached the origin", c)
}

// TestWorker runs the end-to-end checks once per crypto path of the package.
func TestWorker(t *testing.T) {
	for _, crypto := range []string{"host", "pure"} {
		t.Run(crypto, func(t *testing.T) { testWorker(t, crypto) })
	}
}

func testWorker(t *testing.T, crypto string) {
	e := newEnv(t, crypto)
	token, jti := e.admit("alice")
	forged := http.Header{
		"X-Flashgate-User":      {"admin"},
		"x-flashgate-product":   {"everything"},
		"X-FLASHGATE-ADMISSION": {"forged"},
		"X-Flashgate-Role":      {"root"},
	}

	t.Run("valid token reaches the origin", func(t *testing.T) {
		e.t = t
		for _, how := range []string{"bearer", "cookie"} {
			r := e.get("/products/"+e.room+"/buy?case=valid-"+how, token, how, acceptJSON, forged)
			require.Equal(t, http.StatusOK, r.status, "%s: %s", how, r.body)
			require.Equal(t, "origin ok", string(r.body))
			require.Equal(t, crypto, r.header.Get("X-Flashgate-Crypto"), "the signature path used")
			h, ok := e.origin.got("valid-" + how)
			require.True(t, ok, how)
			require.Equal(t, []string{"alice"}, h.Values("X-Flashgate-User"), how)
			require.Equal(t, []string{e.room}, h.Values("X-Flashgate-Product"), how)
			require.Equal(t, []string{jti}, h.Values("X-Flashgate-Admission"), how)
			require.Empty(t, h.Values("X-Flashgate-Role"), "%s: client-sent X-Flashgate-* header forwarded", how)
			if how == "bearer" {
				require.Equal(t, "Bearer "+token, h.Get("Authorization"), "Authorization is kept for the origin")
			}
		}
		require.EqualValues(t, 1, e.jwksGets.Load(), "JWKS fetched once and cached")
	})

	t.Run("unprotected paths pass through", func(t *testing.T) {
		e.t = t
		r := e.get("/about?case=about", "", "", acceptBrowser, forged)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		h, ok := e.origin.got("about")
		require.True(t, ok)
		for k := range h {
			require.False(t, strings.HasPrefix(strings.ToLower(k), "x-flashgate-"), "forwarded %s", k)
		}
	})

	t.Run("refused tokens never reach the origin", func(t *testing.T) {
		e.t = t
		parts := strings.Split(token, ".")
		sig := []byte(parts[2])
		if sig[10] == 'A' {
			sig[10] = 'B'
		} else {
			sig[10] = 'A'
		}
		tampered := parts[0] + "." + parts[1] + "." + string(sig)
		now := time.Now()
		expired := sign(t, e.ring, "bob", e.room, "expired-jti", now.Add(-10*time.Minute), now.Add(-5*time.Minute))

		e.refused("missing", e.room, "", "", http.StatusUnauthorized, "missing")
		e.refused("tampered", e.room, tampered, "bearer", http.StatusUnauthorized, "bad_signature")
		e.refused("tampered-cookie", e.room, tampered, "cookie", http.StatusUnauthorized, "bad_signature")
		e.refused("expired", e.room, expired, "bearer", http.StatusUnauthorized, "expired")
		e.refused("foreign-product", "other", token, "bearer", http.StatusForbidden, "bad_product")
		e.refused("garbage", e.room, "not-a-token", "bearer", http.StatusUnauthorized, "malformed")
		require.EqualValues(t, 1, e.jwksGets.Load(), "no refresh for known kids")
	})

	t.Run("key rotation is picked up on an unknown kid", func(t *testing.T) {
		e.t = t
		before := e.jwksGets.Load()
		// Rotation 1 activates the next key the worker already has and
		// generates a fresh next key; rotation 2 activates that fresh key,
		// which the worker's cached JWKS does not contain.
		require.NoError(t, e.ring.Rotate(time.Now(), 15*time.Minute))
		require.NoError(t, e.ring.Rotate(time.Now(), 15*time.Minute))
		tok, jti2 := e.admit("carol")
		kid := kidOf(t, tok)
		require.Equal(t, e.ring.ActiveKeyID(), kid)
		require.NotContains(t, string(e.jwks0), kid, "the new key must be unknown to the cached JWKS")

		// Eight concurrent requests with the new kid share one refresh.
		const n = 8
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/products/%s/buy?case=rotated-%d", e.worker, e.room, i), nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Accept", acceptJSON)
				resp, err := e.client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("request %d: %d %s", i, resp.StatusCode, body)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for i := range n {
			h, ok := e.origin.got(fmt.Sprintf("rotated-%d", i))
			require.True(t, ok)
			require.Equal(t, "carol", h.Get("X-Flashgate-User"))
			require.Equal(t, jti2, h.Get("X-Flashgate-Admission"))
		}
		require.Equal(t, before+1, e.jwksGets.Load(), "one JWKS refresh for all concurrent requests")

		// The old token (signed by the key retired by rotation 1) still passes.
		r := e.get("/products/"+e.room+"/buy?case=old-after-rotation", token, "bearer", acceptJSON, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	})

	t.Run("unknown kid is refused and refreshes are throttled", func(t *testing.T) {
		e.t = t
		before := e.jwksGets.Load()
		foreign, err := keys.Generate(time.Now())
		require.NoError(t, err)
		now := time.Now()
		tok := sign(t, foreign, "mallory", e.room, "foreign-jti", now, now.Add(5*time.Minute))
		e.refused("unknown-kid", e.room, tok, "bearer", http.StatusUnauthorized, "unknown_key")
		e.refused("unknown-kid-cookie", e.room, tok, "cookie", http.StatusUnauthorized, "unknown_key")
		// The rotation refresh happened moments ago: at most one unknown-kid
		// refresh per 10 s per isolate, so none of these fetched the JWKS.
		require.Equal(t, before, e.jwksGets.Load(), "unknown-kid refreshes must be throttled")
	})
}

// TestWorkerKeysUnavailable: with the issuer down and no JWKS cached, a
// protected request is answered 503 keys_unavailable (browsers too: the
// token may be fine), and nothing reaches the origin.
func TestWorkerKeysUnavailable(t *testing.T) {
	bin := workerdBinary(t)
	wasm := wasmModule(t)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := dead.Addr().String()
	require.NoError(t, dead.Close())
	o := newOrigin(t)
	base := startWorkerd(t, bin, wasm, deadAddr, strings.TrimPrefix(o.srv.URL, "http://"), "auto")

	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	now := time.Now()
	tok := sign(t, ring, "dave", "shoes", "jti-1", now, now.Add(time.Minute))
	client := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, accept := range []string{acceptJSON, acceptBrowser} {
		req, err := http.NewRequest(http.MethodGet, base+"/products/shoes/buy", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", accept)
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s: %s", accept, body)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		var p map[string]any
		require.NoError(t, json.Unmarshal(body, &p))
		require.Equal(t, "keys_unavailable", p["reason"])
		require.Equal(t, "https://flashgate.dev/problems/token-keys-unavailable", p["type"])
	}
	require.Zero(t, o.hits.Load(), "nothing may reach the origin")

	// Unprotected paths do not need keys.
	resp, err := client.Get(base + "/about")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
