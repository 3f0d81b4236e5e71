package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/verifier"
)

// testRing is a one-key KeyRing (kid "test"), independent of package keys.
type testRing struct {
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newTestRing(t testing.TB) *testRing {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return &testRing{pub: pub, priv: priv}
}

var b64 = base64.RawURLEncoding

func (r *testRing) Sign(payload []byte) (string, error) {
	h := b64.EncodeToString([]byte(`{"alg":"EdDSA","kid":"test","typ":"` + verifier.TokenType + `"}`))
	in := h + "." + b64.EncodeToString(payload)
	return in + "." + b64.EncodeToString(ed25519.Sign(r.priv, []byte(in))), nil
}

// SignInvite signs an invite like keys.Ring: typ flashgate-invite+jwt.
func (r *testRing) SignInvite(payload []byte) (string, error) {
	h := b64.EncodeToString([]byte(`{"alg":"EdDSA","kid":"test","typ":"` + flashgate.InviteType + `"}`))
	in := h + "." + b64.EncodeToString(payload)
	return in + "." + b64.EncodeToString(ed25519.Sign(r.priv, []byte(in))), nil
}

// SignReceipt signs a join receipt like keys.Ring: typ fg-receipt+jwt.
func (r *testRing) SignReceipt(payload []byte) (string, error) {
	h := b64.EncodeToString([]byte(`{"alg":"EdDSA","kid":"test","typ":"` + flashgate.ReceiptType + `"}`))
	in := h + "." + b64.EncodeToString(payload)
	return in + "." + b64.EncodeToString(ed25519.Sign(r.priv, []byte(in))), nil
}

func (r *testRing) PublicKey(_ context.Context, kid string) (ed25519.PublicKey, error) {
	if kid != "test" {
		return nil, verifier.ErrUnknownKey
	}
	return r.pub, nil
}

func (r *testRing) PublicJWKS() ([]byte, error) {
	return json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "OKP", "crv": "Ed25519", "kid": "test", "alg": "EdDSA", "use": "sig", "x": b64.EncodeToString(r.pub)}}})
}

const adminToken = "s3cret-admin-token"

type env struct {
	t    testing.TB
	rdb  *redis.Client
	is   *issuer.Issuer
	ring *testRing
	srv  *Server
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func newIssuer(t testing.TB, rdb issuer.Redis, ring issuer.Signer, mod ...func(*issuer.Config)) *issuer.Issuer {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	cfg := issuer.Config{Redis: rdb, WaitingSecret: secret, Signer: ring,
		Issuer: "flashgate", Audience: "orders", Logger: quietLog}
	for _, m := range mod {
		m(&cfg)
	}
	is, err := issuer.New(cfg)
	require.NoError(t, err)
	return is
}

// envOption changes how newEnv builds a test environment.
type envOption func(*envSetup)

type envSetup struct {
	rdb     *redis.Client
	private bool
	issuer  []func(*issuer.Config)
	server  []func(*Options)
}

// withOptions applies mod to the server's Options.
func withOptions(mod ...func(*Options)) envOption {
	return func(s *envSetup) { s.server = append(s.server, mod...) }
}

// withIssuer applies mod to the issuer's Config (nil: none).
func withIssuer(mod func(*issuer.Config)) envOption {
	return func(s *envSetup) {
		if mod != nil {
			s.issuer = append(s.issuer, mod)
		}
	}
}

// withClock makes now the issuer's clock (nil: Redis TIME).
func withClock(now func() time.Time) envOption {
	return withIssuer(func(c *issuer.Config) { c.Now = now })
}

// withRedis runs the issuer on rdb, e.g. a redis-server of the test's own
// (redistest.Start) whose whole keyspace the test may inspect.
func withRedis(rdb *redis.Client) envOption { return func(s *envSetup) { s.rdb = rdb } }

// privateRedis runs the issuer on a redis-server of its own (never
// REDIS_URL), so that snapshots of the whole keyspace see only this test's
// writes.
func privateRedis() envOption { return func(s *envSetup) { s.private = true } }

// newEnv builds the one test environment: an issuer (on REDIS_URL's server
// unless told otherwise) and a Server with the admin API on.
func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	var s envSetup
	for _, o := range opts {
		o(&s)
	}
	rdb := s.rdb
	switch {
	case rdb != nil:
	case s.private:
		rdb = redistest.Start(t).Client(t)
	default:
		rdb = redistest.Client(t)
	}
	ring := newTestRing(t)
	is := newIssuer(t, rdb, ring, s.issuer...)
	o := Options{Issuer: is, Keys: ring, AdminToken: adminToken, Logger: quietLog}
	for _, m := range s.server {
		m(&o)
	}
	srv, err := New(o)
	require.NoError(t, err)
	return &env{t: t, rdb: rdb, is: is, ring: ring, srv: srv}
}

// room creates a fresh room with cfg (zero fields default).
func (e *env) room(cfg issuer.RoomConfig) string {
	e.t.Helper()
	room := redistest.Room("srv")
	_, err := e.is.SetRoom(context.Background(), room, cfg)
	require.NoError(e.t, err)
	return room
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

// problem asserts an RFC 9457 answer with status and code and returns it.
func (r resp) problem(t testing.TB, status int, code string) map[string]any {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	m := r.json(t)
	require.Equal(t, problem.Base+strings.ReplaceAll(code, "_", "-"), m["type"])
	require.Equal(t, code, m["code"])
	require.EqualValues(t, status, m["status"])
	require.NotEmpty(t, m["title"])
	return m
}

// req is a request description; hdr values "" are not sent.
type req struct {
	method, path string
	user         string // X-User-ID
	bearer       string
	ctype        string
	body         string
	hdr          map[string]string
}

func (e *env) do(r req) resp {
	e.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	if r.user != "" {
		hr.Header.Set("X-User-ID", r.user)
	}
	if r.bearer != "" {
		hr.Header.Set("Authorization", "Bearer "+r.bearer)
	}
	if r.body != "" {
		ct := r.ctype
		if ct == "" {
			ct = "application/json"
		}
		hr.Header.Set("Content-Type", ct)
	}
	for k, v := range r.hdr {
		hr.Header.Set(k, v)
	}
	res, err := e.srv.App().Test(hr, 10_000)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	checkOpenAPI(e.t, hr, res.StatusCode, res.Header, b) // openapi_test.go
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// enter enters user into room and returns the Entry JSON.
func (e *env) enter(room, user string) map[string]any {
	e.t.Helper()
	r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: user})
	require.Equal(e.t, 200, r.status, "body: %s", r.body)
	return r.json(e.t)
}

// listen serves the app on a loopback port until the test ends.
func (e *env) listen() string {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(e.t, err)
	done := make(chan error, 1)
	go func() { done <- e.srv.Listen(ln) }()
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.srv.Shutdown(ctx)
		<-done
	})
	return "http://" + ln.Addr().String()
}

// roomKey is the Redis key of one of room's structures (name: config,
// waiting, active, users, seq, admno, admits, bucket, stats, ended, bans, banwhy, unclaimed, priority, invites or laneseqs; the
// layout is lua/prelude.lua's KEYS), for tests that look into Redis.
func roomKey(room, name string) string { return "fg:{" + room + "}:" + name }
