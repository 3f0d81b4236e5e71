// Package testkit holds test fixtures shared across packages: a
// deterministic admission-token signer and a fake clock.
//
// It is test support: its keys are derived from public labels. It imports
// the domain package flashgate but never verifier, so that package
// verifier's own (internal) tests can use it too.
package testkit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/flashgate/flashgate"
)

var b64 = base64.RawURLEncoding

// Signer signs admission tokens with one Ed25519 key, the way keys.Ring
// does: protected header flashgate.NewHeader(Kid), compact JWS.
type Signer struct {
	Kid string             // RFC 7638 thumbprint of Key's public key (or any kid a test sets)
	Key ed25519.PrivateKey // the signing key
}

// NewSigner returns a signer whose key is derived from the test's name:
// the same test gets the same key, and so the same tokens, on every run.
func NewSigner(tb testing.TB) *Signer {
	tb.Helper()
	return SignerFor(tb.Name())
}

// SignerFor returns the signer for label (a deterministic key; the kid is
// its thumbprint).
func SignerFor(label string) *Signer {
	seed := sha256.Sum256([]byte("flashgate testkit signer: " + label))
	key := ed25519.NewKeyFromSeed(seed[:])
	return &Signer{Kid: Thumbprint(key.Public().(ed25519.PublicKey)), Key: key}
}

// Public is the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { return s.Key.Public().(ed25519.PublicKey) }

// Sign returns the compact JWS of claims under the standard header.
func (s *Signer) Sign(claims flashgate.Claims) string {
	return s.SignPayload(claims.JSON())
}

// SignPayload returns the compact JWS of payload (exact bytes) under the
// standard header: what an issuer.Signer adapter needs.
func (s *Signer) SignPayload(payload []byte) string {
	return s.SignRaw(flashgate.NewHeader(s.Kid).JSON(), payload)
}

// SignRaw signs the exact header and payload bytes given (so odd JSON,
// duplicate members or foreign headers survive).
func (s *Signer) SignRaw(header, payload []byte) string {
	in := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	return in + "." + b64.EncodeToString(ed25519.Sign(s.Key, []byte(in)))
}

// JWKS is the public JWK Set of this signer alone.
func (s *Signer) JWKS() []byte { return JWKS(s) }

// JWKS is the public JWK Set of the given signers, in order (RFC 8037 OKP
// members, use "sig", alg "EdDSA"), as keys.Ring publishes it.
func JWKS(signers ...*Signer) []byte {
	type jwk struct {
		Kty string `json:"kty"`
		Crv string `json:"crv"`
		X   string `json:"x"`
		Kid string `json:"kid"`
		Use string `json:"use"`
		Alg string `json:"alg"`
	}
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	for _, s := range signers {
		set.Keys = append(set.Keys, jwk{"OKP", "Ed25519", b64.EncodeToString(s.Public()), s.Kid, "sig", flashgate.Alg})
	}
	b, _ := json.Marshal(set) // strings only: cannot fail
	return b
}

// Thumbprint is the RFC 7638 JWK thumbprint of an Ed25519 public key.
func Thumbprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + b64.EncodeToString(pub) + `"}`))
	return b64.EncodeToString(sum[:])
}
