package keys_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/verifier"
)

// jwksServer serves a ring's public JWKS on loopback and counts requests.
type jwksServer struct {
	*httptest.Server
	mu       sync.Mutex
	body     []byte
	status   int
	delay    time.Duration
	requests atomic.Int64
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{body: body, status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		body, status, delay := s.body, s.status, s.delay
		s.mu.Unlock()
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(body []byte) {
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}

func ringJWKS(t *testing.T, r *keys.Ring) []byte {
	t.Helper()
	b, err := r.PublicJWKS()
	require.NoError(t, err)
	return b
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newRemote(t *testing.T, url string, opts keys.RemoteOptions) *keys.Remote {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	opts.Logger = quietLogger()
	r, err := keys.NewRemote(ctx, url, opts)
	require.NoError(t, err)
	return r
}

func TestRemoteKnownKidFromCache(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	srv := newJWKSServer(t, ringJWKS(t, ring))
	rem := newRemote(t, srv.URL, keys.RemoteOptions{})
	require.EqualValues(t, 1, srv.requests.Load(), "NewRemote fetches once")

	for range 100 {
		for _, k := range ring.Keys() {
			got, err := rem.PublicKey(context.Background(), k.ID)
			require.NoError(t, err)
			want, err := ring.PublicKey(context.Background(), k.ID)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		}
	}
	assert.EqualValues(t, 1, srv.requests.Load(), "served from cache")

	// a token signed by the ring verifies with the remote key
	tok, err := ring.Sign([]byte(`{"a":1}`))
	require.NoError(t, err)
	pub, err := rem.PublicKey(context.Background(), ring.ActiveKeyID())
	require.NoError(t, err)
	assert.True(t, verifySig(t, pub, tok))
}

func TestRemoteUnknownKidOneRefresh(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	srv := newJWKSServer(t, ringJWKS(t, ring))
	rem := newRemote(t, srv.URL, keys.RemoteOptions{})
	require.EqualValues(t, 1, srv.requests.Load())
	srv.mu.Lock()
	srv.delay = 50 * time.Millisecond // keep the fetch in flight while callers pile up
	srv.mu.Unlock()

	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := rem.PublicKey(context.Background(), "unknown-kid")
			assert.ErrorIs(t, err, verifier.ErrUnknownKey)
			assert.NotErrorIs(t, err, verifier.ErrUnavailable)
		}()
	}
	close(start)
	wg.Wait()
	assert.EqualValues(t, 2, srv.requests.Load(), "exactly one refresh for 50 concurrent callers")
}

func TestRemoteRotationPickedUp(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	srv := newJWKSServer(t, ringJWKS(t, ring))
	rem := newRemote(t, srv.URL, keys.RemoteOptions{})

	// two rotations on the issuer: the new active key was never seen by rem
	require.NoError(t, ring.Rotate(time.Now(), time.Minute))
	require.NoError(t, ring.Rotate(time.Now(), time.Minute))
	srv.set(ringJWKS(t, ring))
	tok, err := ring.Sign([]byte(`{}`))
	require.NoError(t, err)

	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pub, err := rem.PublicKey(context.Background(), ring.ActiveKeyID())
			if assert.NoError(t, err) {
				assert.True(t, verifySig(t, pub, tok))
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 2, srv.requests.Load())
}

func TestRemoteKidFloodRateLimited(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	srv := newJWKSServer(t, ringJWKS(t, ring))
	rem := newRemote(t, srv.URL, keys.RemoteOptions{MinRefreshInterval: time.Hour})

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				_, err := rem.PublicKey(context.Background(), fmt.Sprintf("random-%d-%d", g, i))
				assert.ErrorIs(t, err, verifier.ErrUnknownKey)
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 2, srv.requests.Load(), "one forced refresh per MinRefreshInterval")

	// within the interval, even a real new key waits for the background refresh
	require.NoError(t, ring.Rotate(time.Now(), time.Minute))
	require.NoError(t, ring.Rotate(time.Now(), time.Minute))
	srv.set(ringJWKS(t, ring))
	_, err = rem.PublicKey(context.Background(), ring.ActiveKeyID())
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	assert.EqualValues(t, 2, srv.requests.Load())
}

func TestRemoteForcedRefreshAfterInterval(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	srv := newJWKSServer(t, ringJWKS(t, ring))
	const interval = 200 * time.Millisecond
	rem := newRemote(t, srv.URL, keys.RemoteOptions{MinRefreshInterval: interval})

	t0 := time.Now()
	_, err = rem.PublicKey(context.Background(), "x1")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	require.EqualValues(t, 2, srv.requests.Load())
	_, err = rem.PublicKey(context.Background(), "x2")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	if time.Since(t0) < interval {
		assert.EqualValues(t, 2, srv.requests.Load())
	}
	time.Sleep(interval + 50*time.Millisecond)
	_, err = rem.PublicKey(context.Background(), "x3")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	assert.EqualValues(t, 3, srv.requests.Load())
}

func TestRemoteUnavailable(t *testing.T) {
	srv := newJWKSServer(t, nil)
	url := srv.URL
	srv.Close() // nothing listens any more

	rem := newRemote(t, url, keys.RemoteOptions{MinRefreshInterval: time.Hour})
	_, err := rem.PublicKey(context.Background(), "any")
	assert.ErrorIs(t, err, verifier.ErrUnavailable)
	assert.Equal(t, verifier.CodeUnavailable, verifier.CodeOf(err))
	_, err = rem.PublicKey(context.Background(), "any")
	assert.ErrorIs(t, err, verifier.ErrUnavailable, "rate limited, still unavailable")
}

func TestRemoteServerErrorsKeepLastGoodSet(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	srv := newJWKSServer(t, ringJWKS(t, ring))
	rem := newRemote(t, srv.URL, keys.RemoteOptions{MinRefreshInterval: 10 * time.Millisecond})

	srv.mu.Lock()
	srv.status = http.StatusInternalServerError
	srv.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	_, err = rem.PublicKey(context.Background(), "unknown")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey, "a set was fetched before: unknown, not unavailable")
	assert.EqualValues(t, 2, srv.requests.Load())
	_, err = rem.PublicKey(context.Background(), ring.ActiveKeyID())
	assert.NoError(t, err, "last good set kept")
}

func TestRemoteStartsWhileServerDown(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	srv := newJWKSServer(t, ringJWKS(t, ring))
	srv.mu.Lock()
	srv.status = http.StatusServiceUnavailable
	srv.mu.Unlock()
	rem := newRemote(t, srv.URL, keys.RemoteOptions{MinRefreshInterval: 10 * time.Millisecond})
	_, err = rem.PublicKey(context.Background(), ring.ActiveKeyID())
	assert.ErrorIs(t, err, verifier.ErrUnavailable)

	srv.mu.Lock()
	srv.status = http.StatusOK
	srv.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	_, err = rem.PublicKey(context.Background(), ring.ActiveKeyID())
	assert.NoError(t, err, "recovers once the issuer is up")
}

func TestRemoteOnlyEd25519(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	x25519 := `{"kty":"OKP","crv":"X25519","kid":"x","x":"hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo"}`
	rsa := `{"kty":"RSA","kid":"rsa","e":"AQAB","n":"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"}`
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	xs := b64(pub)
	encKey := `{"kty":"OKP","crv":"Ed25519","kid":"enc","use":"enc","x":"` + xs + `"}`
	noKid := `{"kty":"OKP","crv":"Ed25519","x":"` + xs + `"}`
	dup1 := `{"kty":"OKP","crv":"Ed25519","kid":"dup","x":"` + xs + `"}`
	dup2 := `{"kty":"OKP","crv":"Ed25519","kid":"dup","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`
	signOnly := `{"kty":"OKP","crv":"Ed25519","kid":"signonly","key_ops":["sign"],"x":"` + xs + `"}`
	plain := `{"kty":"OKP","crv":"Ed25519","kid":"plain","x":"` + xs + `"}`
	body := `{"keys":[` + x25519 + `,` + rsa + `,` + encKey + `,` + noKid + `,` + dup1 + `,` + dup2 + `,` + signOnly + `,` + plain + `]}`
	srv := newJWKSServer(t, []byte(body))
	rem := newRemote(t, srv.URL, keys.RemoteOptions{MinRefreshInterval: time.Hour})

	for _, kid := range []string{"x", "rsa", "enc", "dup", "signonly", ""} {
		_, err := rem.PublicKey(context.Background(), kid)
		assert.ErrorIs(t, err, verifier.ErrUnknownKey, kid)
	}
	got, err := rem.PublicKey(context.Background(), "plain")
	require.NoError(t, err, "a key without use/alg is accepted")
	assert.Equal(t, pub, got)
	_ = ring
}

func TestRemoteContextCancelled(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	srv := newJWKSServer(t, ringJWKS(t, ring))
	rem := newRemote(t, srv.URL, keys.RemoteOptions{})
	srv.mu.Lock()
	srv.delay = 300 * time.Millisecond
	srv.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = rem.PublicKey(ctx, "unknown")
	assert.ErrorIs(t, err, verifier.ErrUnavailable)
	assert.Equal(t, verifier.CodeUnavailable, verifier.CodeOf(err))
	assert.Contains(t, err.Error(), context.DeadlineExceeded.Error())
}

func TestNewRemoteBadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x/jwks.json", "/relative", "http://"} {
		_, err := keys.NewRemote(context.Background(), u, keys.RemoteOptions{})
		assert.Error(t, err, u)
	}
}
