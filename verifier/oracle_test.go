package verifier_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwt"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/verifier"
)

// jwxAccepts is the oracle: jwx v2 with the key pinned to EdDSA, issuer,
// audience, product, required exp/iat/jti/sub and the same clock.
func jwxAccepts(tok string, pub ed25519.PublicKey, now time.Time) bool {
	_, err := jwt.Parse([]byte(tok),
		jwt.WithKey(jwa.EdDSA, pub),
		jwt.WithValidate(true),
		jwt.WithIssuer(tokencases.Issuer),
		jwt.WithAudience(tokencases.Audience),
		jwt.WithClaimValue(verifier.ProductClaim, tokencases.Product),
		jwt.WithRequiredClaim("exp"),
		jwt.WithRequiredClaim("iat"),
		jwt.WithRequiredClaim("jti"),
		jwt.WithRequiredClaim("sub"),
		jwt.WithClock(jwt.ClockFunc(func() time.Time { return now })),
	)
	return err == nil
}

// TestDifferentialJWX mutates the valid token (bytes, segments, and JSON
// re-signed with the real key) and checks: whenever jwx rejects, we reject.
// It also counts the other direction (we accept, jwx rejects), which must
// not happen either: our rules are a strict subset of what jwx accepts.
func TestDifferentialJWX(t *testing.T) {
	set := buildSet(t)
	c := set.Cases[0]
	v := tokencases.Verifier(t, set, set.Config(c))
	pub := set.Current.Public().(ed25519.PublicKey)
	now := time.Unix(c.Now, 0)

	require.True(t, jwxAccepts(set.Valid, pub, now), "oracle rejects the valid token")
	_, err := v.Verify(context.Background(), set.Valid, c.Expect())
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(1, 2))
	b64 := base64.RawURLEncoding
	segs := strings.Split(set.Valid, ".")
	hdr, _ := b64.DecodeString(segs[0])
	pay, _ := b64.DecodeString(segs[1])
	const charset = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ \n\x00{}\"\\:,"
	const jsonset = "{}[]\":,\\ 0123456789.eE-+aeiulnrstuxyzEDSA\x00\xff"
	mutateBytes := func(b []byte, set string) []byte {
		b = append([]byte(nil), b...)
		switch rng.IntN(3) {
		case 0:
			b[rng.IntN(len(b))] = set[rng.IntN(len(set))]
		case 1:
			i := rng.IntN(len(b))
			b = append(b[:i], b[i+1:]...)
		default:
			i := rng.IntN(len(b) + 1)
			b = append(b[:i], append([]byte{set[rng.IntN(len(set))]}, b[i:]...)...)
		}
		return b
	}
	var jwxRejects, weAccept, both int
	for i := 0; i < 4000; i++ {
		var tok string
		switch rng.IntN(6) {
		case 0, 1: // raw byte mutations of the compact token
			tok = string(mutateBytes([]byte(set.Valid), charset))
			for rng.IntN(3) == 0 {
				tok = string(mutateBytes([]byte(tok), charset))
			}
		case 2: // segment shuffles
			s := append([]string(nil), segs...)
			switch rng.IntN(4) {
			case 0:
				s[0], s[1] = s[1], s[0]
			case 1:
				s = append(s, s[rng.IntN(3)])
			case 2:
				s = s[:2]
			default:
				s[rng.IntN(3)] = s[rng.IntN(3)]
			}
			tok = strings.Join(s, ".")
		case 3: // truncation
			tok = set.Valid[:rng.IntN(len(set.Valid))]
		case 4: // payload JSON mutation, re-signed with the real key
			tok = tokencases.Sign(set.Current, string(hdr), string(mutateBytes(pay, jsonset)))
		default: // header JSON mutation, re-signed
			tok = tokencases.Sign(set.Current, string(mutateBytes(hdr, jsonset)), string(pay))
		}
		_, err := v.Verify(context.Background(), tok, c.Expect())
		oracle := jwxAccepts(tok, pub, now)
		if !oracle {
			jwxRejects++
			require.Errorf(t, err, "jwx rejects but we accept: %q", tok)
		}
		if err == nil {
			weAccept++
			require.Truef(t, oracle, "we accept but jwx rejects: %q", tok)
			if oracle {
				both++
			}
		}
	}
	t.Logf("4000 mutations: jwx rejected %d; we accepted %d (jwx agreed on %d)", jwxRejects, weAccept, both)
}
