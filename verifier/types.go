package verifier

import (
	"context"
	"crypto/ed25519"
	"time"
)

// Token profile constants (docs/DESIGN.md#tokens).
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

// PreparedKeySet is an optional extension of KeySet for a key set that
// decodes each public key once (Ed25519 point decompression, RFC 8032
// §5.1.3: a field square root per key) instead of on every Verify. New
// checks for it once, with a type assertion; Verify then calls PreparedKey
// instead of PublicKey at step 7 and the returned key's Verify instead of
// crypto/ed25519's at step 8. Every other rule, check order and error is
// unchanged, and Prepare/Pending/Finish keep working (Pending.PublicKey is
// the prepared key's PublicKey). Implementations: *keys.Ring,
// *keys.FileRing, and edcache.Wrap over any KeySet (package keys/edcache,
// built on filippo.io/edwards25519, so outside this stdlib-only package).
//
// PreparedKey must answer exactly as PublicKey would for the same kid at
// the same instant: the same error (ErrUnknownKey, ErrUnavailable, or an
// error of the set's own, which Verify reports as ErrUnavailable), and on
// success a PreparedKey whose PublicKey returns the bytes PublicKey would
// return. A set that caches prepared keys must never verify with a key the
// set no longer holds under that kid (rotation): key the cache on the key
// bytes, or rebuild it with the set.
type PreparedKeySet interface {
	KeySet
	PreparedKey(ctx context.Context, kid string) (PreparedKey, error)
}

// PreparedKey is one Ed25519 public key decoded once, for repeated
// verification. It must be safe for concurrent use and retain neither
// argument of Verify.
//
// Verify(message, sig) must return exactly
// crypto/ed25519.Verify(PublicKey(), message, sig[:]) for every message
// and sig, when PublicKey() is 32 bytes: RFC 8032 §5.1.7 as Go implements
// it — S ≥ L rejected (no malleability), A decoded as Go decodes it
// (non-canonical y accepted, a non-point rejecting every signature), the
// cofactorless equation [S]B = R + [k]A checked by comparing the encoding
// of [S]B − [k]A with R, small-order A or R not rejected by themselves.
// The signature is passed by value so that a caller's copy does not escape.
type PreparedKey interface {
	// PublicKey returns the key's encoding as the KeySet holds it (32 bytes
	// for an Ed25519 key); the caller must not modify it.
	PublicKey() ed25519.PublicKey
	// Verify reports whether sig (R ‖ S, RFC 8032 §5.1.6) is a valid
	// signature of message under the key.
	Verify(message []byte, sig [ed25519.SignatureSize]byte) bool
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
	// Directives, when set, adds Verify's step 14: a token whose claims all
	// passed is refused with ErrRoomStopped when its iat is before its
	// room's not_before, and with ErrDirectivesUnavailable when the source
	// has no directive to answer from. nil: no directive check.
	Directives Directives
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
