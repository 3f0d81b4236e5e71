// Package ringtest is test support for benchmarks and tests of key rings:
// a fresh keys.Ring and an admission token it signed, split the way a
// verifier splits it.
package ringtest

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/keys"
)

// Issuer and Audience are the iss and aud of Token's claims.
const (
	Issuer   = "https://issuer.example"
	Audience = "orders"
)

// Token is an admission token a fresh ring signed (ring.Sign: the issuer's
// own path), valid from now − 1 min to now + 4 min.
type Token struct {
	Ring  *keys.Ring
	Kid   string // the ring's active key, which signed Raw
	Raw   string // the compact JWS
	Input []byte // the JWS signing input, "header.payload" (RFC 7515 §5.1)
	Sig   [ed25519.SignatureSize]byte
}

// NewToken generates a ring at now and signs one admission token with it.
// It fails tb on any error.
func NewToken(tb testing.TB, now time.Time) Token {
	tb.Helper()
	ring, err := keys.Generate(now)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := ring.Sign(flashgate.NewClaims(Issuer, Audience, "user-12345", "sku-1",
		"1234.56.1763680000000", now.Add(-time.Minute), now.Add(4*time.Minute)).JSON())
	if err != nil {
		tb.Fatal(err)
	}
	dot := strings.LastIndexByte(raw, '.')
	sig, err := base64.RawURLEncoding.DecodeString(raw[dot+1:])
	if err != nil || len(sig) != ed25519.SignatureSize {
		tb.Fatalf("ringtest: signature of %q: %v", raw, err)
	}
	return Token{Ring: ring, Kid: ring.ActiveKeyID(), Raw: raw, Input: []byte(raw[:dot]),
		Sig: [ed25519.SignatureSize]byte(sig)}
}
