package verifier

import (
	"context"
	"crypto/ed25519"
	"time"
)

// Token profile constants (docs/DESIGN.md "Tokens").
const (
	// TokenType is the admission token's typ header (RFC 8725 §3.11 explicit typing).
	TokenType = "flashgate-admission+jwt"
	// Alg is the only accepted alg; it is fixed by the key type (Ed25519), never by the token.
	Alg = "EdDSA"
	// ProductClaim is the private claim that carries the product (waiting room id).
	ProductClaim = "product"
	// MaxTokenSize is the largest raw token accepted, in bytes, checked before any decoding.
	MaxTokenSize = 4096
	// MaxLeeway is the largest clock leeway a Config may ask for.
	MaxLeeway = 60 * time.Second
	// DefaultMaxLifetime bounds exp − iat when Config.MaxLifetime is zero. It must be at
	// least the issuer's session duration (issuer default 5 min, issuer maximum 15 min).
	DefaultMaxLifetime = 15 * time.Minute
)

// KeySet resolves a kid to an Ed25519 public key. Implementations: *StaticKeys
// (a parsed JWKS document) and *remote.KeySet in package verifier/remote (a
// fetched, cached JWKS); both are stdlib only.
//
// PublicKey returns ErrUnknownKey (possibly wrapped) when kid names no key, and
// ErrUnavailable when the set cannot be obtained at all.
type KeySet interface {
	PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error)
}

// Config sets what a Verifier expects. The zero value of each optional field is safe.
type Config struct {
	// Issuer is the required exact iss. Required.
	Issuer string
	// Audience is the required exact aud (a single string; arrays are refused). Required.
	Audience string
	// Product is the product expected when Verify's want.Product is empty.
	Product string
	// Leeway tolerates clock skew on exp, iat and nbf. 0 ≤ Leeway ≤ MaxLeeway.
	Leeway time.Duration
	// MaxLifetime bounds exp − iat; zero means DefaultMaxLifetime.
	MaxLifetime time.Duration
	// Now returns the current time; nil means time.Now. Edge hosts inject their clock.
	Now func() time.Time
}

// Expect names what one call of Verify requires beyond the Config.
type Expect struct {
	// Product overrides Config.Product for this call. One of the two must be set.
	Product string
	// User, when non-empty, must equal the token's sub.
	User string
}

// Token is a verified admission token.
type Token struct {
	KeyID     string    // kid header
	Issuer    string    // iss
	Audience  string    // aud
	User      string    // sub
	Product   string    // product claim (waiting room id)
	ID        string    // jti, the admission id
	IssuedAt  time.Time // iat (second precision)
	ExpiresAt time.Time // exp (second precision)
	// Raw is the compact token as verified, for callers that forward it
	// (order.HTTP sends it to the issuer's completion endpoint).
	Raw string
}
