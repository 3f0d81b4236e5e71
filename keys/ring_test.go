package keys_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/verifier"
)

// RFC 8037 A.2 public key and its A.3 RFC 7638 thumbprint.
func TestThumbprintRFC8037(t *testing.T) {
	x, err := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	require.NoError(t, err)
	assert.Equal(t, "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k", keys.Thumbprint(ed25519.PublicKey(x)))
}

// Our thumbprint agrees with jwx's for random keys.
func TestThumbprintMatchesJWX(t *testing.T) {
	for range 20 {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		jk, err := jwk.FromRaw(pub)
		require.NoError(t, err)
		tp, err := jk.Thumbprint(0x5) // crypto.SHA256
		require.NoError(t, err)
		assert.Equal(t, base64.RawURLEncoding.EncodeToString(tp), keys.Thumbprint(pub))
	}
}

func TestGenerate(t *testing.T) {
	now := time.Now()
	r, err := keys.Generate(now)
	require.NoError(t, err)
	ks := r.Keys()
	require.Len(t, ks, 2)
	assert.Equal(t, keys.StatusActive, ks[0].Status)
	assert.Equal(t, keys.StatusNext, ks[1].Status)
	assert.Equal(t, r.ActiveKeyID(), ks[0].ID)
	assert.NotEqual(t, ks[0].ID, ks[1].ID)
	for _, k := range ks {
		assert.Equal(t, now.Unix(), k.Created.Unix())
		assert.True(t, k.RetireUntil.IsZero())
	}
	// both published from the start
	set := parseJWKS(t, r)
	assert.Equal(t, 2, set.Len())
}

func parseJWKS(t *testing.T, r interface{ PublicJWKS() ([]byte, error) }) jwk.Set {
	t.Helper()
	b, err := r.PublicJWKS()
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"d"`)
	assert.NotContains(t, string(b), "flashgate_")
	set, err := jwk.Parse(b)
	require.NoError(t, err)
	return set
}

func TestPublicJWKSShape(t *testing.T) {
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	b, err := r.PublicJWKS()
	require.NoError(t, err)
	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.Keys, 2)
	for _, k := range doc.Keys {
		assert.Len(t, k, 6, "exactly kty, crv, x, kid, use, alg: %v", k)
		assert.Equal(t, "OKP", k["kty"])
		assert.Equal(t, "Ed25519", k["crv"])
		assert.Equal(t, "sig", k["use"])
		assert.Equal(t, "EdDSA", k["alg"])
		x, err := base64.RawURLEncoding.DecodeString(k["x"].(string))
		require.NoError(t, err)
		assert.Equal(t, keys.Thumbprint(x), k["kid"])
	}
}

func TestSignVerifiesWithJWX(t *testing.T) {
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	payload := []byte(`{"iss":"flashgate","sub":"u1","product":"p1","exp":1767225900}`)
	tok, err := r.Sign(payload)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(tok, "."))

	set := parseJWKS(t, r)
	jk, ok := set.LookupKeyID(r.ActiveKeyID())
	require.True(t, ok)
	got, err := jws.Verify([]byte(tok), jws.WithKey(jwa.EdDSA, jk))
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	// and with the whole set, selected by kid
	got, err = jws.Verify([]byte(tok), jws.WithKeySet(set))
	require.NoError(t, err)
	assert.Equal(t, payload, got)

	// header is exactly alg, kid, typ
	hdr, err := base64.RawURLEncoding.DecodeString(strings.SplitN(tok, ".", 2)[0])
	require.NoError(t, err)
	assert.Equal(t, `{"alg":"EdDSA","kid":"`+r.ActiveKeyID()+`","typ":"flashgate-admission+jwt"}`, string(hdr))
	assert.Equal(t, verifier.TokenType, "flashgate-admission+jwt")

	// verifies with the key PublicKey returns
	pub, err := r.PublicKey(context.Background(), r.ActiveKeyID())
	require.NoError(t, err)
	i := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	require.NoError(t, err)
	assert.True(t, ed25519.Verify(pub, []byte(tok[:i]), sig))

	// deterministic
	tok2, err := r.Sign(payload)
	require.NoError(t, err)
	assert.Equal(t, tok, tok2)
	tok3, err := r.Sign([]byte(`{}`))
	require.NoError(t, err)
	assert.NotEqual(t, tok, tok3)
}

func TestPublicKeyUnknown(t *testing.T) {
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	_, err = r.PublicKey(context.Background(), "nope")
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	assert.Equal(t, verifier.CodeUnknownKey, verifier.CodeOf(err))
	for _, k := range r.Keys() {
		_, err := r.PublicKey(context.Background(), k.ID)
		assert.NoError(t, err)
	}
}

func TestRotate(t *testing.T) {
	now := time.Now()
	const lifetime = 5 * time.Minute
	r, err := keys.Generate(now.Add(-time.Hour))
	require.NoError(t, err)
	a := r.ActiveKeyID()
	b := r.Keys()[1].ID

	require.NoError(t, r.Rotate(now, lifetime))
	assert.Equal(t, b, r.ActiveKeyID(), "the previous next key signs")
	tok, err := r.Sign([]byte(`{}`))
	require.NoError(t, err)
	assert.Contains(t, decodeHeader(t, tok), b)

	ks := r.Keys()
	require.Len(t, ks, 3)
	assert.Equal(t, keys.StatusActive, ks[0].Status)
	assert.Equal(t, keys.StatusNext, ks[1].Status)
	c := ks[1].ID
	assert.NotContains(t, []string{a, b}, c)
	assert.Equal(t, now.Unix(), ks[1].Created.Unix())
	assert.Equal(t, keys.KeyInfo{ID: a, Status: keys.StatusRetired, Created: ks[2].Created,
		RetireUntil: time.Unix(now.Add(lifetime+keys.RetireMargin).Unix(), 0)}, ks[2])

	// the old active key stays published until retire_until
	set := parseJWKS(t, r)
	assert.Equal(t, 3, set.Len())
	_, ok := set.LookupKeyID(a)
	assert.True(t, ok)
	_, err = r.PublicKey(context.Background(), a)
	assert.NoError(t, err)

	// a rotation before retire_until keeps it …
	require.NoError(t, r.Rotate(now.Add(lifetime), lifetime))
	assert.Equal(t, c, r.ActiveKeyID())
	_, ok = parseJWKS(t, r).LookupKeyID(a)
	assert.True(t, ok)
	assert.Len(t, r.Keys(), 4)

	// … a rotation past it drops it
	require.NoError(t, r.Rotate(now.Add(lifetime+keys.RetireMargin), lifetime))
	_, ok = parseJWKS(t, r).LookupKeyID(a)
	assert.False(t, ok)
	_, err = r.PublicKey(context.Background(), a)
	assert.ErrorIs(t, err, verifier.ErrUnknownKey)
	_, ok = parseJWKS(t, r).LookupKeyID(b)
	assert.True(t, ok, "b retired at the second rotation, still within its window")
	assert.Len(t, r.Keys(), 4)

	assert.Error(t, r.Rotate(now, 0), "lifetime must be positive")
}

func decodeHeader(t *testing.T, tok string) string {
	t.Helper()
	hdr, err := base64.RawURLEncoding.DecodeString(strings.SplitN(tok, ".", 2)[0])
	require.NoError(t, err)
	return string(hdr)
}

func TestRotateWithoutNextKey(t *testing.T) {
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	doc := privateDoc(t, r)
	doc.Keys = doc.Keys[:1] // drop the next key (hand edit)
	r2, err := keys.ParsePrivate(doc.marshal(t))
	require.NoError(t, err)
	active := r2.ActiveKeyID()

	err = r2.Rotate(time.Now(), time.Minute)
	require.ErrorIs(t, err, keys.ErrNoNextKey)
	assert.Equal(t, active, r2.ActiveKeyID(), "unchanged")
	assert.Len(t, r2.Keys(), 1)

	require.NoError(t, r2.AddNextKey(time.Now()))
	assert.Len(t, r2.Keys(), 2)
	assert.Error(t, r2.AddNextKey(time.Now()), "only one next key")
	assert.Equal(t, active, r2.ActiveKeyID(), "the new key is only published")
	require.NoError(t, r2.Rotate(time.Now(), time.Minute))
	assert.NotEqual(t, active, r2.ActiveKeyID())
}

func TestRingConcurrentUse(t *testing.T) {
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				if i == 0 && j%10 == 0 {
					assert.NoError(t, r.Rotate(time.Now(), time.Minute))
				}
				tok, err := r.Sign([]byte(`{"n":1}`))
				assert.NoError(t, err)
				_, err = jws.Parse([]byte(tok))
				assert.NoError(t, err)
				_, _ = r.PublicJWKS()
				_, _ = r.PublicKey(context.Background(), r.ActiveKeyID())
				_ = r.Keys()
			}
		}()
	}
	wg.Wait()
}

// The public JWKS is accepted by the verifier's own stdlib parser.
func TestPublicJWKSParsesWithVerifier(t *testing.T) {
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	require.NoError(t, r.Rotate(time.Now(), time.Minute))
	b, err := r.PublicJWKS()
	require.NoError(t, err)
	static, err := verifier.ParseJWKS(b)
	require.NoError(t, err)
	require.Len(t, static.KeyIDs(), 3)
	for _, k := range r.Keys() {
		want, err := r.PublicKey(context.Background(), k.ID)
		require.NoError(t, err)
		got, err := static.PublicKey(context.Background(), k.ID)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
}

// TestSignReceipt: a join receipt carries exactly {"alg":"EdDSA","kid":…,
// "typ":"fg-receipt+jwt"}, verifies under the ring's key (jwx), and the
// admission-token verifier refuses it by its typ.
func TestSignReceipt(t *testing.T) {
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	payload := []byte(`{"iss":"i","room":"r","epoch":"e","sub":"u","arrival":1,"iat":1,"commitment":"c"}`)
	tok, err := r.SignReceipt(payload)
	require.NoError(t, err)
	hdr, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	require.NoError(t, err)
	assert.Equal(t, `{"alg":"EdDSA","kid":"`+r.ActiveKeyID()+`","typ":"fg-receipt+jwt"}`, string(hdr))
	pub, err := r.PublicKey(context.Background(), r.ActiveKeyID())
	require.NoError(t, err)
	got, err := jws.Verify([]byte(tok), jws.WithKey(jwa.EdDSA, pub))
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	v, err := verifier.New(r, verifier.Config{Issuer: "i", Audience: "a", Product: "r"})
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), tok, verifier.Expect{})
	require.ErrorIs(t, err, verifier.ErrBadType)
}
