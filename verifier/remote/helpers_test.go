package remote_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/verifier/remote"
)

// fakeClock is an injectable Config.Now. With step > 0 every reading
// advances it by step (so MinRefreshInterval never holds a fetch back).
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// jwksServer serves a JWK Set document on loopback and counts requests.
// While gate is non-nil, requests signal entered and then wait for gate to
// be closed.
type jwksServer struct {
	*httptest.Server
	mu          sync.Mutex
	body        []byte
	status      int
	contentType string
	header      http.Header // extra response headers
	gate        chan struct{}
	entered     chan struct{}
	accept      string // Accept header of the last request
	requests    atomic.Int64
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{body: body, status: http.StatusOK, contentType: "application/jwk-set+json"}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		body, status, ct, gate, entered := s.body, s.status, s.contentType, s.gate, s.entered
		for k, v := range s.header {
			w.Header()[k] = v
		}
		s.accept = r.Header.Get("Accept")
		s.mu.Unlock()
		if gate != nil {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		} else {
			w.Header()["Content-Type"] = nil // no sniffing: send none
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) setBody(body []byte) {
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}

func (s *jwksServer) setStatus(status int) {
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
}

func (s *jwksServer) setHeader(name, value string) {
	s.mu.Lock()
	if s.header == nil {
		s.header = http.Header{}
	}
	s.header.Set(name, value)
	s.mu.Unlock()
}

// hold makes the next requests block until the returned release is called;
// entered receives once per blocked request (buffered, never blocks the
// server).
func (s *jwksServer) hold() (entered <-chan struct{}, release func()) {
	gate := make(chan struct{})
	ch := make(chan struct{}, 64)
	s.mu.Lock()
	s.gate, s.entered = gate, ch
	s.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate, s.entered = nil, nil
			s.mu.Unlock()
			close(gate)
		})
	}
}

// testKey is an Ed25519 key pair with a kid.
type testKey struct {
	kid  string
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newKey(t *testing.T, kid string) testKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return testKey{kid: kid, pub: pub, priv: priv}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwk writes the public JWK (RFC 8037 §2) by hand; extra is appended
// inside the object, e.g. `,"use":"sig"`.
func (k testKey) jwk(extra string) string {
	return `{"kty":"OKP","crv":"Ed25519","kid":"` + k.kid + `","x":"` + b64(k.pub) + `"` + extra + `}`
}

// jwks wraps JWKs in a JWK Set document (RFC 7517 §5).
func jwks(keys ...string) []byte {
	return []byte(`{"keys":[` + strings.Join(keys, ",") + `]}`)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// newSet builds a KeySet for url whose life ends with the test. cfg.Logger
// defaults to a quiet logger, cfg.Now to clock (when not nil).
func newSet(t *testing.T, url string, clock *fakeClock, cfg remote.Config) *remote.KeySet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	if cfg.Now == nil && clock != nil {
		cfg.Now = clock.Now
	}
	s, err := remote.New(ctx, url, &cfg)
	require.NoError(t, err)
	return s
}

// probeCtx reports, once, that a caller has begun waiting on it: PublicKey
// selects on ctx.Done() exactly while it waits for a fetch.
type probeCtx struct {
	context.Context
	once    sync.Once
	waiting chan<- struct{}
}

func (c *probeCtx) Done() <-chan struct{} {
	c.once.Do(func() { c.waiting <- struct{}{} })
	return c.Context.Done()
}

// receive waits for n values on ch, failing the test after a generous
// deadline (a hang guard, not a timing assumption).
func receive(t *testing.T, ch <-chan struct{}, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for i := range n {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("got %d of %d signals", i, n)
		}
	}
}
