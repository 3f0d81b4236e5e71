package remote_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/verifier"
	"github.com/flashgate/flashgate/verifier/remote"
)

// admissionToken signs an admission token of room "r1" issued at iat.
func admissionToken(k testKey, iat int64) string {
	h := b64([]byte(`{"alg":"EdDSA","kid":"` + k.kid + `","typ":"` + verifier.TokenType + `"}`))
	p := b64([]byte(fmt.Sprintf(`{"iss":"https://issuer.test","aud":"orders","sub":"alice","product":"r1","jti":"j","iat":%d,"exp":%d}`, iat, iat+300)))
	return h + "." + p + "." + b64(ed25519.Sign(k.priv, []byte(h+"."+p)))
}

// TestDirectives: with remote.Directives as Config.Directives, Verify
// refuses (directives_unavailable) until a document was fetched; answers
// from memory within the document's max-age; picks up a stop (room_stopped
// for tokens issued before not_before) with the first lookup after it, in
// one fetch; and on a failed fetch keeps the last document (still
// refusing), retrying no sooner than Retry.
func TestDirectives(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	k := newKey(t, "k1")
	srv := newJWKSServer(t, []byte(`{"rooms":{}}`))
	srv.setHeader("Cache-Control", "public, max-age=5")
	srv.setStatus(http.StatusServiceUnavailable)

	d, err := remote.NewDirectives(ctx, srv.URL, &remote.DirectivesConfig{Now: clock.Now, Logger: quietLogger()})
	require.NoError(t, err)
	keys, err := verifier.ParseJWKS(jwks(k.jwk("")))
	require.NoError(t, err)
	v, err := verifier.New(keys, verifier.Config{Issuer: "https://issuer.test",
		Audience: "orders", Product: "r1", Now: clock.Now, Directives: d})
	require.NoError(t, err)
	iat := clock.Now().Unix()
	tok := admissionToken(k, iat)

	_, err = v.Verify(ctx, tok, verifier.Expect{})
	assert.Equal(t, verifier.CodeDirectivesUnavailable, verifier.CodeOf(err), "never fetched: refused, not let through: %v", err)
	assert.Equal(t, int64(1), srv.requests.Load(), "a failed fetch is not retried before Retry")

	srv.setStatus(http.StatusOK)
	clock.Advance(time.Second)
	_, err = v.Verify(ctx, tok, verifier.Expect{})
	require.NoError(t, err, "no stop for r1")

	// A stop is published; within max-age the cached document answers.
	srv.setBody([]byte(fmt.Sprintf(`{"rooms":{"r1":{"not_before":%d},"r2":{"not_before":1}}}`, iat+1)))
	clock.Advance(4 * time.Second)
	_, err = v.Verify(ctx, tok, verifier.Expect{})
	require.NoError(t, err, "the document is 4 s old, max-age 5 s")
	assert.Equal(t, int64(2), srv.requests.Load())
	clock.Advance(time.Second)
	_, err = v.Verify(ctx, tok, verifier.Expect{})
	assert.ErrorIs(t, err, verifier.ErrRoomStopped, "one fetch after max-age, the stop refuses the token")
	assert.Equal(t, "room_stopped", verifier.CodeOf(err).String())
	_, err = v.Verify(ctx, admissionToken(k, iat+1), verifier.Expect{})
	require.NoError(t, err, "a token issued at not_before passes")

	// The issuer goes down: the last document stays in use, past its
	// max-age; no lookup waits, and fetches are retried once per Retry.
	srv.setStatus(http.StatusInternalServerError)
	clock.Advance(6 * time.Second)
	_, err = v.Verify(ctx, tok, verifier.Expect{})
	assert.ErrorIs(t, err, verifier.ErrRoomStopped, "a failed fetch keeps the last directive (never fail open)")
	n := srv.requests.Load()
	_, err = v.Verify(ctx, tok, verifier.Expect{})
	assert.ErrorIs(t, err, verifier.ErrRoomStopped)
	assert.Equal(t, n, srv.requests.Load(), "no second fetch within Retry")
	st := d.Stats()
	assert.Equal(t, uint64(2), st.Failures)
	assert.Error(t, st.LastError)
}
