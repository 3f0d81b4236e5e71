package remote_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/verifier"
	"github.com/flashgate/flashgate/verifier/remote"
)

// verifySig checks the Ed25519 signature of a compact JWS.
func verifySig(t *testing.T, pub ed25519.PublicKey, tok string) bool {
	t.Helper()
	i := strings.LastIndexByte(tok, '.')
	require.Positive(t, i)
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	require.NoError(t, err)
	return ed25519.Verify(pub, []byte(tok[:i]), sig)
}

func ringJWKS(t *testing.T, r *keys.Ring) []byte {
	t.Helper()
	b, err := r.PublicJWKS()
	require.NoError(t, err)
	return b
}

// The issuer's own document (keys.Ring.PublicJWKS) is served from memory
// after the one fetch in New, and its keys verify the ring's tokens.
func TestIssuerDocumentServedFromCache(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	srv := newJWKSServer(t, ringJWKS(t, ring))
	rem := newSet(t, srv.URL, newClock(), remote.Config{})
	require.EqualValues(t, 1, srv.requests.Load(), "New fetches once")

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

	tok, err := ring.Sign([]byte(`{"a":1}`))
	require.NoError(t, err)
	pub, err := rem.PublicKey(context.Background(), ring.ActiveKeyID())
	require.NoError(t, err)
	assert.True(t, verifySig(t, pub, tok))

	st := rem.Stats()
	assert.EqualValues(t, 1, st.Fetches)
	assert.Zero(t, st.Failures)
	assert.Len(t, st.KeyIDs, len(ring.Keys()))
	assert.NoError(t, st.LastError)
}

func TestNilConfigAndAcceptHeader(t *testing.T) {
	a := newKey(t, "a")
	srv := newJWKSServer(t, jwks(a.jwk("")))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rem, err := remote.New(ctx, srv.URL, nil)
	require.NoError(t, err)
	got, err := rem.PublicKey(context.Background(), "a")
	require.NoError(t, err)
	assert.Equal(t, a.pub, got)
	srv.mu.Lock()
	accept := srv.accept
	srv.mu.Unlock()
	assert.Contains(t, accept, "application/jwk-set+json")
}

// An unknown kid causes one fetch; a second unknown kid within
// MinRefreshInterval causes none; once the fake clock has passed the
// interval the next one does.
func TestUnknownKidRefreshRateLimited(t *testing.T) {
	a := newKey(t, "a")
	srv := newJWKSServer(t, jwks(a.jwk("")))
	clock := newClock()
	const interval = 10 * time.Second
	rem := newSet(t, srv.URL, clock, remote.Config{MinRefreshInterval: interval})
	require.EqualValues(t, 1, srv.requests.Load())

	_, err := rem.PublicKey(context.Background(), "x1")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	assert.NotErrorIs(t, err, verifier.ErrUnavailable)
	assert.Equal(t, verifier.CodeUnknownKey, verifier.CodeOf(err))
	require.EqualValues(t, 2, srv.requests.Load(), "unknown kid: one fetch")

	_, err = rem.PublicKey(context.Background(), "x2")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	assert.EqualValues(t, 2, srv.requests.Load(), "second unknown kid at once: no fetch")

	clock.Advance(interval - time.Nanosecond)
	_, err = rem.PublicKey(context.Background(), "x3")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	assert.EqualValues(t, 2, srv.requests.Load(), "just inside the interval: no fetch")

	clock.Advance(time.Nanosecond)
	_, err = rem.PublicKey(context.Background(), "x4")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	assert.EqualValues(t, 3, srv.requests.Load(), "interval passed: one fetch")

	// a key published meanwhile is found by the permitted refresh
	b := newKey(t, "b")
	srv.setBody(jwks(a.jwk(""), b.jwk("")))
	_, err = rem.PublicKey(context.Background(), "b")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey, "rate limited: b not fetched yet")
	clock.Advance(interval)
	got, err := rem.PublicKey(context.Background(), "b")
	require.NoError(t, err)
	assert.Equal(t, b.pub, got)
	assert.EqualValues(t, 4, srv.requests.Load())

	_, err = rem.PublicKey(context.Background(), "")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey, "empty kid")
	assert.EqualValues(t, 4, srv.requests.Load(), "an empty kid never fetches")
}

// 50 concurrent lookups of an unknown kid share one fetch. The clock
// advances an hour on every reading, so MinRefreshInterval never holds a
// fetch back: only single-flight keeps the count at one.
func TestUnknownKidSingleFlight(t *testing.T) {
	a := newKey(t, "a")
	srv := newJWKSServer(t, jwks(a.jwk("")))
	clock := newClock()
	clock.step = time.Hour
	rem := newSet(t, srv.URL, clock, remote.Config{})
	require.EqualValues(t, 1, srv.requests.Load())

	b := newKey(t, "b")
	srv.setBody(jwks(a.jwk(""), b.jwk("")))
	entered, release := srv.hold()
	defer release()

	const callers = 50
	waiting := make(chan struct{}, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := &probeCtx{Context: context.Background(), waiting: waiting}
			got, err := rem.PublicKey(ctx, "b")
			if assert.NoError(t, err) {
				assert.Equal(t, b.pub, got)
			}
		}()
	}
	receive(t, entered, 1)
	receive(t, waiting, callers) // every caller waits on the fetch in flight
	release()
	wg.Wait()
	assert.EqualValues(t, 2, srv.requests.Load(), "one fetch for 50 concurrent callers")
}

// After two rotations of the issuer's keys.Ring, the new active key, never
// seen before, is fetched once for 50 callers.
func TestRotationPickedUp(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	srv := newJWKSServer(t, ringJWKS(t, ring))
	rem := newSet(t, srv.URL, newClock(), remote.Config{})

	require.NoError(t, ring.Rotate(time.Now(), time.Minute))
	require.NoError(t, ring.Rotate(time.Now(), time.Minute))
	srv.setBody(ringJWKS(t, ring))
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

func TestKidFloodRateLimited(t *testing.T) {
	a := newKey(t, "a")
	srv := newJWKSServer(t, jwks(a.jwk("")))
	clock := newClock()
	rem := newSet(t, srv.URL, clock, remote.Config{MinRefreshInterval: time.Hour})

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

	long := strings.Repeat("k", 3000)
	_, err := rem.PublicKey(context.Background(), long)
	require.ErrorIs(t, err, verifier.ErrUnknownKey)
	assert.Less(t, len(err.Error()), 200, "an attacker's long kid is truncated in the error")
}

func TestUnavailableWhenNeverFetched(t *testing.T) {
	srv := newJWKSServer(t, nil)
	url := srv.URL
	srv.Close() // nothing listens any more

	clock := newClock()
	rem := newSet(t, url, clock, remote.Config{MinRefreshInterval: time.Hour})
	_, err := rem.PublicKey(context.Background(), "any")
	assert.ErrorIs(t, err, verifier.ErrUnavailable)
	assert.NotErrorIs(t, err, verifier.ErrUnknownKey)
	assert.Equal(t, verifier.CodeUnavailable, verifier.CodeOf(err))
	_, err = rem.PublicKey(context.Background(), "any")
	assert.ErrorIs(t, err, verifier.ErrUnavailable, "rate limited, still unavailable")
	assert.Contains(t, err.Error(), "connect", "names the last fetch error")

	st := rem.Stats()
	assert.EqualValues(t, 2, st.Fetches, "New's and one forced fetch")
	assert.EqualValues(t, 2, st.Failures)
	assert.Nil(t, st.KeyIDs)
	assert.Error(t, st.LastError)
	assert.Equal(t, clock.Now(), st.LastFailure)
}

// The issuer is down when the order service starts: ErrUnavailable, then
// the set is fetched once the issuer is up and the interval has passed.
func TestStartsWhileServerDown(t *testing.T) {
	a := newKey(t, "a")
	srv := newJWKSServer(t, jwks(a.jwk("")))
	srv.setStatus(http.StatusServiceUnavailable)
	clock := newClock()
	rem := newSet(t, srv.URL, clock, remote.Config{})
	_, err := rem.PublicKey(context.Background(), "a")
	assert.ErrorIs(t, err, verifier.ErrUnavailable)
	assert.Contains(t, err.Error(), "503")
	assert.EqualValues(t, 2, srv.requests.Load())

	srv.setStatus(http.StatusOK)
	_, err = rem.PublicKey(context.Background(), "a")
	assert.ErrorIs(t, err, verifier.ErrUnavailable, "within MinRefreshInterval: no retry yet")
	assert.EqualValues(t, 2, srv.requests.Load())

	clock.Advance(remote.DefaultMinRefreshInterval)
	got, err := rem.PublicKey(context.Background(), "a")
	require.NoError(t, err, "recovers once the issuer is up")
	assert.Equal(t, a.pub, got)
	assert.EqualValues(t, 3, srv.requests.Load())
}

func TestServerErrorsKeepLastGoodSet(t *testing.T) {
	a := newKey(t, "a")
	srv := newJWKSServer(t, jwks(a.jwk("")))
	clock := newClock()
	rem := newSet(t, srv.URL, clock, remote.Config{})

	srv.setStatus(http.StatusInternalServerError)
	clock.Advance(time.Hour)
	_, err := rem.PublicKey(context.Background(), "unknown")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey, "a set was fetched before: unknown, not unavailable")
	assert.EqualValues(t, 2, srv.requests.Load())
	got, err := rem.PublicKey(context.Background(), "a")
	require.NoError(t, err, "last good set kept")
	assert.Equal(t, a.pub, got)
	assert.EqualValues(t, 1, rem.Stats().Failures)
}

// Keys the verifier skips (another kty or crv, use "enc", key_ops without
// "verify", alg other than EdDSA) are not returned; the rest of the set is.
func TestOnlyEd25519SignatureKeys(t *testing.T) {
	x25519 := `{"kty":"OKP","crv":"X25519","kid":"x","x":"hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo"}`
	rsa := `{"kty":"RSA","kid":"rsa","e":"AQAB","n":"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"}`
	k := newKey(t, "")
	enc := testKey{kid: "enc", pub: k.pub}.jwk(`,"use":"enc"`)
	signOnly := testKey{kid: "signonly", pub: k.pub}.jwk(`,"key_ops":["sign"]`)
	otherAlg := testKey{kid: "es256", pub: k.pub}.jwk(`,"alg":"ES256"`)
	plain := testKey{kid: "plain", pub: k.pub}.jwk("")
	full := testKey{kid: "full", pub: k.pub}.jwk(`,"use":"sig","alg":"EdDSA","key_ops":["verify"]`)
	doc := jwks(x25519, rsa, enc, signOnly, otherAlg, plain, full)

	oracle, err := verifier.ParseJWKS(doc)
	require.NoError(t, err)
	require.Equal(t, []string{"full", "plain"}, oracle.KeyIDs())

	srv := newJWKSServer(t, doc)
	rem := newSet(t, srv.URL, newClock(), remote.Config{})
	for _, kid := range []string{"x", "rsa", "enc", "signonly", "es256", ""} {
		_, err := rem.PublicKey(context.Background(), kid)
		assert.ErrorIs(t, err, verifier.ErrUnknownKey, kid)
	}
	for _, kid := range []string{"plain", "full"} {
		got, err := rem.PublicKey(context.Background(), kid)
		require.NoError(t, err, kid)
		assert.Equal(t, k.pub, got)
	}
	assert.Equal(t, oracle.KeyIDs(), rem.Stats().KeyIDs)
}

// A document verifier.ParseJWKS refuses is refused as a whole, exactly as
// ParseJWKS refuses it: the fetch fails, is logged and counted, and the
// previous good set stays (the new kid in the bad document is not used).
func TestRefusedDocumentsKeepPreviousSet(t *testing.T) {
	a, b := newKey(t, "a"), newKey(t, "b")
	other := newKey(t, "b")
	docs := map[string][]byte{
		"duplicate kid":           jwks(a.jwk(""), b.jwk(""), other.jwk("")),
		"private d":               jwks(a.jwk(""), b.jwk(`,"d":"`+b64(b.priv.Seed())+`"`)),
		"private d on a skipped":  jwks(a.jwk(""), b.jwk(""), `{"kty":"RSA","kid":"r","n":"AQAB","e":"AQAB","d":"AQAB"}`),
		"Ed25519 key without kid": jwks(a.jwk(""), b.jwk(""), `{"kty":"OKP","crv":"Ed25519","x":"`+b64(b.pub)+`"}`),
		"short x":                 jwks(a.jwk(""), testKey{kid: "b", pub: b.pub[:31]}.jwk("")),
		"padded x":                []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"b","x":"` + b64(b.pub) + `="}]}`),
		"duplicate member name":   []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"b","kid":"a","x":"` + b64(b.pub) + `"}]}`),
		"no usable key":           jwks(`{"kty":"OKP","crv":"X25519","kid":"b","x":"` + b64(b.pub) + `"}`),
		"keys not an array":       []byte(`{"keys":{}}`),
		"invalid JSON":            []byte(`{"keys":[` + b.jwk("")),
		"empty body":              {},
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			wantErr := func() error { _, err := verifier.ParseJWKS(doc); return err }()
			require.Error(t, wantErr, "the oracle refuses the document")

			srv := newJWKSServer(t, jwks(a.jwk("")))
			clock := newClock()
			var logs syncBuffer
			rem := newSet(t, srv.URL, clock, remote.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			srv.setBody(doc)
			clock.Advance(time.Hour)

			_, err := rem.PublicKey(context.Background(), "b")
			assert.ErrorIs(t, err, verifier.ErrUnknownKey)
			assert.EqualValues(t, 2, srv.requests.Load())
			got, err := rem.PublicKey(context.Background(), "a")
			require.NoError(t, err, "previous good set kept")
			assert.Equal(t, a.pub, got)

			st := rem.Stats()
			assert.EqualValues(t, 1, st.Failures)
			require.Error(t, st.LastError)
			assert.Contains(t, st.LastError.Error(), wantErr.Error(), "the verifier's own reason")
			assert.Equal(t, []string{"a"}, st.KeyIDs)
			assert.Contains(t, logs.String(), "keeping the cached set")
		})
	}

	// at start, a refused document leaves the set unavailable
	srv := newJWKSServer(t, docs["duplicate kid"])
	rem := newSet(t, srv.URL, newClock(), remote.Config{})
	_, err := rem.PublicKey(context.Background(), "a")
	assert.ErrorIs(t, err, verifier.ErrUnavailable)
	assert.Contains(t, err.Error(), "duplicate kid")
}

// Responses other than a bounded JSON 200 are failed fetches.
func TestResponseChecks(t *testing.T) {
	a, b := newKey(t, "a"), newKey(t, "b")
	good := jwks(a.jwk(""), b.jwk(""))
	huge := append(jwks(a.jwk(""), b.jwk("")), strings.Repeat(" ", remote.MaxBodySize)...)
	cases := []struct {
		name   string
		status int
		ct     string
		body   []byte
		ok     bool
	}{
		{"200 jwk-set+json", 200, "application/jwk-set+json", good, true},
		{"200 json with charset", 200, "application/json; charset=utf-8", good, true},
		{"200 no Content-Type", 200, "", good, true},
		{"200 text/html", 200, "text/html; charset=utf-8", good, false},
		{"200 text/plain", 200, "text/plain", good, false},
		{"200 bad media type", 200, "application/json; =", good, false},
		{"204", 204, "application/json", nil, false},
		{"301 without Location", 301, "application/json", good, false},
		{"404", 404, "application/json", good, false},
		{"body over 1 MiB", 200, "application/json", huge, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newJWKSServer(t, jwks(a.jwk("")))
			clock := newClock()
			rem := newSet(t, srv.URL, clock, remote.Config{})
			srv.mu.Lock()
			srv.status, srv.contentType, srv.body = tc.status, tc.ct, tc.body
			srv.mu.Unlock()
			clock.Advance(time.Hour)
			_, err := rem.PublicKey(context.Background(), "b")
			if tc.ok {
				assert.NoError(t, err)
				assert.Zero(t, rem.Stats().Failures)
				return
			}
			assert.ErrorIs(t, err, verifier.ErrUnknownKey)
			assert.EqualValues(t, 1, rem.Stats().Failures)
			_, err = rem.PublicKey(context.Background(), "a")
			assert.NoError(t, err)
		})
	}
}

// A caller whose ctx ends while it waits for the fetch gets ErrUnavailable
// with the ctx's error; the fetch itself goes on for the other callers.
func TestCallerContextEnds(t *testing.T) {
	a := newKey(t, "a")
	srv := newJWKSServer(t, jwks(a.jwk("")))
	rem := newSet(t, srv.URL, newClock(), remote.Config{})
	b := newKey(t, "b")
	srv.setBody(jwks(a.jwk(""), b.jwk("")))
	entered, release := srv.hold()
	defer release()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := rem.PublicKey(ctx, "b")
		errc <- err
	}()
	receive(t, entered, 1)

	// a known kid is answered while the fetch is in flight
	got, err := rem.PublicKey(context.Background(), "a")
	require.NoError(t, err)
	assert.Equal(t, a.pub, got)

	cancel()
	err = <-errc
	assert.ErrorIs(t, err, verifier.ErrUnavailable)
	assert.Equal(t, verifier.CodeUnavailable, verifier.CodeOf(err))
	assert.Contains(t, err.Error(), context.Canceled.Error())

	// the detached fetch completes and publishes b
	waiting := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err := rem.PublicKey(&probeCtx{Context: context.Background(), waiting: waiting}, "b")
		if assert.NoError(t, err) {
			assert.Equal(t, b.pub, got)
		}
	}()
	receive(t, waiting, 1) // joined the same fetch
	release()
	<-done
	assert.EqualValues(t, 2, srv.requests.Load())
}

// The end of New's ctx makes later fetches fail; the last good set stays.
func TestLifetimeContextEnds(t *testing.T) {
	a := newKey(t, "a")
	srv := newJWKSServer(t, jwks(a.jwk("")))
	clock := newClock()
	ctx, cancel := context.WithCancel(context.Background())
	rem, err := remote.New(ctx, srv.URL, &remote.Config{Now: clock.Now, Logger: quietLogger()})
	require.NoError(t, err)
	cancel()
	clock.Advance(time.Hour)
	_, err = rem.PublicKey(context.Background(), "b")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	_, err = rem.PublicKey(context.Background(), "a")
	assert.NoError(t, err)
	st := rem.Stats()
	assert.ErrorIs(t, st.LastError, context.Canceled)
	assert.EqualValues(t, 1, srv.requests.Load())
}

// The background refresh is due max(max-age, MinRefreshInterval) after a
// fetch (Cache-Control max-age, else Expires − Date), MinRefreshInterval
// without either, and MinRefreshInterval after a failed fetch.
func TestBackgroundRefreshDue(t *testing.T) {
	const minRefresh = 10 * time.Second
	cases := []struct {
		name   string
		header map[string]string
		due    time.Duration
	}{
		{"no header", nil, minRefresh},
		{"max-age 60 (the issuer's)", map[string]string{"Cache-Control": "public, max-age=60"}, time.Minute},
		{"max-age below the minimum", map[string]string{"Cache-Control": "max-age=3"}, minRefresh},
		{"quoted max-age", map[string]string{"Cache-Control": `max-age="120"`}, 2 * time.Minute},
		{"bad max-age", map[string]string{"Cache-Control": "max-age=soon"}, minRefresh},
		{"no-store wins", map[string]string{"Cache-Control": "max-age=600, no-store"}, minRefresh},
		{"no-cache wins", map[string]string{"Cache-Control": "no-cache, max-age=600"}, minRefresh},
		{"Expires - Date", map[string]string{
			"Date":    "Thu, 01 Jan 2026 00:00:00 GMT",
			"Expires": "Thu, 01 Jan 2026 00:05:00 GMT",
		}, 5 * time.Minute},
		{"max-age beats Expires", map[string]string{
			"Cache-Control": "max-age=30",
			"Date":          "Thu, 01 Jan 2026 00:00:00 GMT",
			"Expires":       "Thu, 01 Jan 2026 00:05:00 GMT",
		}, 30 * time.Second},
		{"Expires in the past", map[string]string{
			"Date":    "Thu, 01 Jan 2026 00:05:00 GMT",
			"Expires": "Thu, 01 Jan 2026 00:00:00 GMT",
		}, minRefresh},
		{"invalid Expires", map[string]string{"Expires": "0"}, minRefresh},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newKey(t, "a")
			srv := newJWKSServer(t, jwks(a.jwk("")))
			for k, v := range tc.header {
				srv.setHeader(k, v)
			}
			clock := newClock()
			rem := newSet(t, srv.URL, clock, remote.Config{MinRefreshInterval: minRefresh})
			require.EqualValues(t, 1, srv.requests.Load())

			clock.Advance(tc.due - time.Nanosecond)
			rem.RefreshIfDue()
			assert.EqualValues(t, 1, srv.requests.Load(), "not due yet")
			clock.Advance(time.Nanosecond)
			rem.RefreshIfDue()
			assert.EqualValues(t, 2, srv.requests.Load(), "due")
			rem.RefreshIfDue()
			assert.EqualValues(t, 2, srv.requests.Load(), "rescheduled")
		})
	}

	t.Run("after a failure", func(t *testing.T) {
		a, b := newKey(t, "a"), newKey(t, "b")
		srv := newJWKSServer(t, jwks(a.jwk("")))
		srv.setHeader("Cache-Control", "max-age=3600")
		clock := newClock()
		rem := newSet(t, srv.URL, clock, remote.Config{MinRefreshInterval: minRefresh})
		srv.setStatus(http.StatusBadGateway)
		clock.Advance(time.Hour)
		rem.RefreshIfDue()
		assert.EqualValues(t, 2, srv.requests.Load())
		assert.EqualValues(t, 1, rem.Stats().Failures)

		srv.setStatus(http.StatusOK)
		srv.setBody(jwks(a.jwk(""), b.jwk("")))
		clock.Advance(minRefresh - time.Nanosecond)
		rem.RefreshIfDue()
		assert.EqualValues(t, 2, srv.requests.Load())
		clock.Advance(time.Nanosecond)
		rem.RefreshIfDue()
		assert.EqualValues(t, 3, srv.requests.Load(), "retried MinRefreshInterval after the failure")
		got, err := rem.PublicKey(context.Background(), "b")
		require.NoError(t, err, "background refresh published b")
		assert.Equal(t, b.pub, got)
		assert.EqualValues(t, 3, srv.requests.Load())
	})
}

// The background goroutine refreshes a due set by itself and removes keys
// the issuer no longer publishes.
func TestBackgroundLoop(t *testing.T) {
	defer remote.SetMinCheckEvery(time.Millisecond)()
	a, b := newKey(t, "a"), newKey(t, "b")
	srv := newJWKSServer(t, jwks(a.jwk(""), b.jwk("")))
	clock := newClock()
	rem := newSet(t, srv.URL, clock, remote.Config{CheckEvery: time.Millisecond})
	_, err := rem.PublicKey(context.Background(), "a")
	require.NoError(t, err)

	srv.setBody(jwks(b.jwk(""))) // a retired
	clock.Advance(remote.DefaultMinRefreshInterval)
	require.Eventually(t, func() bool { return srv.requests.Load() >= 2 && len(rem.Stats().KeyIDs) == 1 },
		10*time.Second, time.Millisecond)
	assert.Equal(t, []string{"b"}, rem.Stats().KeyIDs)
}

func TestNewBadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x/jwks.json", "/relative", "http://", "http://[::1", "jwks.json"} {
		_, err := remote.New(context.Background(), u, nil)
		assert.Error(t, err, u)
	}
}

// Example-style check that a KeySet plugs into verifier.New.
func TestUsableByVerifier(t *testing.T) {
	a := newKey(t, "a")
	srv := newJWKSServer(t, jwks(a.jwk("")))
	rem := newSet(t, srv.URL, nil, remote.Config{})
	_, err := verifier.New(rem, verifier.Config{Issuer: "flashgate", Audience: "orders"})
	require.NoError(t, err)
}
