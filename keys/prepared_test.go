package keys_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/verifier"
)

// TestPreparedKeyMatchesPublicKey: for every kid of a rotated ring — active,
// next, retired, retired past retire_until, unknown — PreparedKey gives the
// error PublicKey gives, or a prepared key with PublicKey's bytes that
// verifies exactly as crypto/ed25519 does.
func TestPreparedKeyMatchesPublicKey(t *testing.T) {
	now := time.Now()
	expired, err := keys.Generate(now.Add(-3 * time.Hour))
	require.NoError(t, err)
	require.NoError(t, expired.Rotate(now.Add(-3*time.Hour), time.Minute)) // retired, past retire_until
	published, err := keys.Generate(now.Add(-time.Hour))
	require.NoError(t, err)
	require.NoError(t, published.Rotate(now.Add(-time.Minute), time.Hour)) // retired, still published
	found, unknown := 0, 0
	for _, r := range []*keys.Ring{expired, published} {
		f, u := comparePrepared(t, r)
		found += f
		unknown += u
	}
	assert.Equal(t, 5, found, "active and next of each ring, the published retired key")
	assert.Equal(t, 3, unknown, "the unknown kid twice, the expired retired key")
}

// comparePrepared checks PreparedKey against PublicKey for "nope" and every
// kid of r and returns how many were found and how many refused.
func comparePrepared(t *testing.T, r *keys.Ring) (found, unknown int) {
	tok, err := r.Sign([]byte(`{"n":1}`))
	require.NoError(t, err)
	dot := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	require.NoError(t, err)
	ctx := context.Background()
	kids := []string{"nope"}
	for _, k := range r.Keys() {
		kids = append(kids, k.ID)
	}
	for _, kid := range kids {
		pub, perr := r.PublicKey(ctx, kid)
		pk, err := r.PreparedKey(ctx, kid)
		if perr != nil {
			unknown++
			assert.ErrorIs(t, err, verifier.ErrUnknownKey)
			assert.Equal(t, perr.Error(), err.Error())
			assert.Nil(t, pk)
			continue
		}
		found++
		require.NoError(t, err)
		assert.Equal(t, pub, pk.PublicKey())
		want := ed25519.Verify(pub, []byte(tok[:dot]), sig)
		assert.Equal(t, want, pk.Verify([]byte(tok[:dot]), [64]byte(sig)), kid)
		assert.Equal(t, kid == r.ActiveKeyID(), want)
		bad := [64]byte(sig)
		bad[5] ^= 1
		assert.False(t, pk.Verify([]byte(tok[:dot]), bad))
	}
	return found, unknown
}

// TestFileRingPreparedKeyAfterReload: a verifier over a FileRing (what the
// server's /v1/complete uses) follows a replaced key file: the old ring's
// tokens are refused as soon as the reload drops their key, the new ring's
// accepted — no prepared key outlives its ring.
func TestFileRingPreparedKeyAfterReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.jwks")
	old, err := keys.Generate(time.Now())
	require.NoError(t, err)
	require.NoError(t, old.Save(path))
	f, err := keys.OpenFile(path, keys.FileOptions{CheckEvery: time.Hour, Logger: quietLogger()})
	require.NoError(t, err)
	v, err := verifier.New(f, verifier.Config{Issuer: "iss", Audience: "aud", Product: "p"})
	require.NoError(t, err)
	now := time.Now()
	claims := flashgate.NewClaims("iss", "aud", "u", "p", "j", now, now.Add(time.Minute)).JSON()
	ctx := context.Background()

	oldTok, err := old.Sign(claims)
	require.NoError(t, err)
	_, err = v.Verify(ctx, oldTok, verifier.Expect{})
	require.NoError(t, err)

	repl, err := keys.Generate(time.Now())
	require.NoError(t, err)
	require.NoError(t, repl.Save(path+".new"))
	require.NoError(t, os.Rename(path+".new", path))
	require.NoError(t, f.Reload())

	_, err = v.Verify(ctx, oldTok, verifier.Expect{})
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	newTok, err := repl.Sign(claims)
	require.NoError(t, err)
	_, err = v.Verify(ctx, newTok, verifier.Expect{})
	assert.NoError(t, err)
	// A token of the new kid signed by the old key (forged) is refused.
	forged := newTok[:strings.LastIndexByte(newTok, '.')+1] + oldTok[strings.LastIndexByte(oldTok, '.')+1:]
	_, err = v.Verify(ctx, forged, verifier.Expect{})
	assert.ErrorIs(t, err, verifier.ErrBadSignature)
}
