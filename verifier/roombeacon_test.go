package verifier_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/verifier"
)

var b64 = base64.RawURLEncoding

// signAs signs payload under a header {"alg":"EdDSA","kid":"k1","typ":typ}
// (or hdr when given), as keys.Ring does.
func signAs(priv ed25519.PrivateKey, typ string, payload []byte, hdr ...string) string {
	h := `{"alg":"EdDSA","kid":"k1","typ":"` + typ + `"}`
	if len(hdr) > 0 {
		h = hdr[0]
	}
	in := b64.EncodeToString([]byte(h)) + "." + b64.EncodeToString(payload)
	return in + "." + b64.EncodeToString(ed25519.Sign(priv, []byte(in)))
}

func beaconPayload(now time.Time, mod ...func(*verifier.Beacon)) []byte {
	b := verifier.Beacon{Iss: "https://issuer.test", Room: "sku-1", Iat: now.Unix(), Exp: now.Unix() + 5, State: "open",
		TotalWaiting: 300, Head: 11, Tail: 310, NearHead: 50, Buckets: [][2]int64{{11, 1}, {20, 10}, {310, 300}}}
	for _, m := range mod {
		m(&b)
	}
	p, _ := json.Marshal(b)
	return p
}

// flipAt returns tok with its character at i changed (to another base64url one).
func flipAt(tok string, i int) string {
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}

// jwxVerifies is the signature oracle: jwx's JWS verification with the key
// pinned to EdDSA.
func jwxVerifies(tok string, pub ed25519.PublicKey) bool {
	_, err := jws.Verify([]byte(tok), jws.WithKey(jwa.EdDSA, pub))
	return err == nil
}

func TestVerifyBeacon(t *testing.T) {
	ctx := context.Background()
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	now := time.Unix(1_900_000_000, 0)
	v, err := verifier.New(verifier.NewStaticKeys(map[string]ed25519.PublicKey{"k1": pub}),
		verifier.Config{Issuer: "https://issuer.test", Audience: "orders", Product: "sku-1", Now: func() time.Time { return now }})
	require.NoError(t, err)

	good := signAs(priv, verifier.BeaconType, beaconPayload(now))
	require.True(t, jwxVerifies(good, pub), "the oracle accepts the beacon's signature")
	b, err := v.VerifyBeacon(ctx, good, "sku-1")
	require.NoError(t, err)
	require.EqualValues(t, 300, b.TotalWaiting)
	_, err = v.VerifyBeacon(ctx, good, "")
	require.NoError(t, err, "any room")

	// A beacon is no admission token (RFC 8725 §3.11), whatever its claims.
	_, err = v.Verify(ctx, good, verifier.Expect{})
	require.ErrorIs(t, err, verifier.ErrBadType)
	// Nor is an admission token (or any other typ) a beacon.
	for _, typ := range []string{verifier.TokenType, "flashgate-invite+jwt", "fg-receipt+jwt", "JWT", ""} {
		_, err = v.VerifyBeacon(ctx, signAs(priv, typ, beaconPayload(now)), "sku-1")
		require.ErrorIs(t, err, verifier.ErrBadType, "typ %q", typ)
	}

	refused := map[string]struct {
		tok  string
		want error
	}{
		"another room":      {good, verifier.ErrBadProduct},
		"expired":           {signAs(priv, verifier.BeaconType, beaconPayload(now.Add(-10*time.Second))), verifier.ErrExpired},
		"future":            {signAs(priv, verifier.BeaconType, beaconPayload(now.Add(10*time.Second))), verifier.ErrNotYetValid},
		"long-lived":        {signAs(priv, verifier.BeaconType, beaconPayload(now, func(b *verifier.Beacon) { b.Exp = b.Iat + 3600 })), verifier.ErrLifetimeTooLong},
		"other issuer":      {signAs(priv, verifier.BeaconType, beaconPayload(now, func(b *verifier.Beacon) { b.Iss = "evil" })), verifier.ErrBadIssuer},
		"no exp":            {signAs(priv, verifier.BeaconType, beaconPayload(now, func(b *verifier.Beacon) { b.Exp = 0 })), verifier.ErrInvalidClaims},
		"alg none":          {signAs(priv, "", beaconPayload(now), `{"alg":"none","kid":"k1","typ":"flashgate-beacon+jwt"}`), verifier.ErrUnsupportedAlg},
		"jwk header":        {signAs(priv, "", beaconPayload(now), `{"alg":"EdDSA","kid":"k1","typ":"flashgate-beacon+jwt","jwk":{}}`), verifier.ErrForbiddenHeader},
		"unknown kid":       {signAs(priv, "", beaconPayload(now), `{"alg":"EdDSA","kid":"k2","typ":"flashgate-beacon+jwt"}`), verifier.ErrUnknownKey},
		"duplicate typ":     {signAs(priv, "", beaconPayload(now), `{"alg":"EdDSA","kid":"k1","typ":"JWT","typ":"flashgate-beacon+jwt"}`), verifier.ErrDuplicateKey},
		"bad signature":     {flipAt(good, len(good)-10), verifier.ErrBadSignature},
		"two segments":      {good[:len(good)-87], verifier.ErrMalformed},
		"payload not JSON":  {signAs(priv, verifier.BeaconType, []byte("[1,2]")), verifier.ErrInvalidClaims},
		"too large":         {string(make([]byte, verifier.MaxBeaconSize+1)), verifier.ErrTooLarge},
		"tampered payload":  {flipAt(good, strings.IndexByte(good, '.')+10), verifier.ErrBadSignature},
		"signed by another": {signAs(ed25519.NewKeyFromSeed(make([]byte, 32)), verifier.BeaconType, beaconPayload(now)), verifier.ErrBadSignature},
	}
	for name, c := range refused {
		room := "sku-1"
		if name == "another room" {
			room = "sku-2"
		}
		_, err := v.VerifyBeacon(ctx, c.tok, room)
		require.Error(t, err, name)
		if c.want != nil {
			require.ErrorIs(t, err, c.want, name)
		}
	}

	// The oracle agrees on the signature: every mutation jwx refuses, we refuse.
	rng := rand.New(rand.NewPCG(34, 3))
	for range 2000 {
		m := []byte(good)
		m[rng.IntN(len(m))] ^= byte(1 + rng.IntN(255))
		_, err := v.VerifyBeacon(ctx, string(m), "sku-1")
		if !jwxVerifies(string(m), pub) {
			require.Error(t, err, "jwx refuses %q", m)
		}
	}
}

// TestBeaconPlace: the place a page computes from a beacon, and its bound.
func TestBeaconPlace(t *testing.T) {
	b := verifier.Beacon{Priority: 2, Before: 0, Head: 11, Tail: 110,
		Buckets: [][2]int64{{11, 1}, {12, 2}, {20, 10}, {50, 30}, {110, 90}}}
	for _, c := range []struct {
		arrival, place, maxErr int64
		ok                     bool
	}{
		{10, 0, -1, false},   // ahead of the head: ask status
		{11, 3, 0, true},     // the head: priority 2 + 1
		{12, 4, 0, true},     // a one-wide bucket: exact
		{20, 12, 0, true},    // nobody of (12, 20] left: exact
		{50, 32, 10, true},   // (20, 50]: 30 arrivals, 20 still waiting: within 10
		{35, 22, 10, true},   // mid-bucket: 2 + 10 + ceil(15·20/30)
		{111, 93, -1, false}, // after the tail: a guess
	} {
		place, maxErr, ok := b.Place(c.arrival)
		require.Equal(t, c.ok, ok, "arrival %d", c.arrival)
		require.EqualValues(t, c.place, place, "arrival %d", c.arrival)
		require.EqualValues(t, c.maxErr, maxErr, "arrival %d", c.arrival)
	}
	b.ExactThrough = 40
	_, _, ok := b.Place(35)
	require.False(t, ok, "the lottery places arrivals up to exact_through")
}
