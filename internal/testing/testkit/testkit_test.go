package testkit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/verifier"
)

// TestSignerVerifies: a token from Sign passes the verifier with the
// signer's JWKS, the kid is the thumbprint, and signing is deterministic.
func TestSignerVerifies(t *testing.T) {
	s := testkit.NewSigner(t)
	require.Equal(t, testkit.Thumbprint(s.Public()), s.Kid)
	require.Equal(t, s.Key, testkit.NewSigner(t).Key, "same test, same key")
	require.NotEqual(t, s.Key, testkit.SignerFor("other").Key)

	iat := time.Unix(1763680000, 0)
	claims := flashgate.NewClaims("https://i", "orders", "u1", "sku-1", "j1", iat, iat.Add(5*time.Minute))
	tok := s.Sign(claims)
	require.Equal(t, tok, s.SignRaw(flashgate.NewHeader(s.Kid).JSON(), claims.JSON()))
	require.Equal(t, tok, s.SignPayload(claims.JSON()))

	keys, err := verifier.ParseJWKS(s.JWKS())
	require.NoError(t, err)
	require.Equal(t, []string{s.Kid}, keys.KeyIDs())
	v, err := verifier.New(keys, verifier.Config{Issuer: "https://i", Audience: "orders",
		Now: func() time.Time { return iat.Add(time.Minute) }})
	require.NoError(t, err)
	got, err := v.Verify(context.Background(), tok, verifier.Expect{Product: "sku-1", User: "u1"})
	require.NoError(t, err)
	require.Equal(t, "j1", got.ID)

	two, err := verifier.ParseJWKS(testkit.JWKS(s, testkit.SignerFor("b")))
	require.NoError(t, err)
	require.Len(t, two.KeyIDs(), 2)
}

func TestClock(t *testing.T) {
	c := testkit.NewClock(testkit.Epoch)
	require.Equal(t, testkit.Epoch, c.Now())
	c.Advance(90 * time.Second)
	require.Equal(t, testkit.Epoch.Add(90*time.Second), c.Now())
	c.Set(time.Unix(5, 0))
	require.Equal(t, time.Unix(5, 0), c.Now())
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, time.Unix(5, 0).Add(800*time.Millisecond), c.Now())
}
