package keys

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/verifier"
)

// RFC 8037 A.4: signing "Example of Ed25519 signing" with the A.1 key and
// header {"alg":"EdDSA"} gives this JWS (Ed25519 is deterministic).
func TestSignCompactRFC8037A4(t *testing.T) {
	seed, err := base64.RawURLEncoding.DecodeString("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
	require.NoError(t, err)
	priv := ed25519.NewKeyFromSeed(seed)
	assert.Equal(t, "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
		base64.RawURLEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)))

	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA"}`))
	got := signCompact(priv, header, []byte("Example of Ed25519 signing"))
	assert.Equal(t, "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc."+
		"hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg", got)
}

// A retired key disappears from PublicJWKS and PublicKey at retire_until,
// even before the next Rotate drops it from the ring.
func TestRetiredKeyHiddenAtRetireUntil(t *testing.T) {
	t0 := time.Unix(1_767_225_600, 0)
	r, err := Generate(t0)
	require.NoError(t, err)
	old := r.ActiveKeyID()
	require.NoError(t, r.Rotate(t0, 5*time.Minute))
	until := t0.Add(5*time.Minute + RetireMargin)

	r.now = func() time.Time { return until.Add(-time.Second) }
	_, err = r.PublicKey(context.Background(), old)
	require.NoError(t, err)
	jwks, err := r.PublicJWKS()
	require.NoError(t, err)
	assert.Contains(t, string(jwks), old)

	r.now = func() time.Time { return until }
	_, err = r.PublicKey(context.Background(), old)
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	jwks, err = r.PublicJWKS()
	require.NoError(t, err)
	assert.NotContains(t, string(jwks), old)
	assert.Len(t, r.Keys(), 3, "the ring keeps it until the next Rotate")

	require.NoError(t, r.Rotate(until, 5*time.Minute))
	for _, k := range r.Keys() {
		assert.NotEqual(t, old, k.ID)
	}
}
