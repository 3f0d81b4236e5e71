package flashgate

import (
	"encoding/json"
	"time"
)

// The admission token profile (docs/order-service.md#using-verifier-in-an-order-service). The verifier core keeps
// its own copies (verifier.TokenType, verifier.Alg, verifier.ProductClaim) so
// that it compiles with TinyGo alone; TestTokenProfileMatchesVerifier holds
// them equal.
const (
	// TokenType is the typ header (RFC 8725 §3.11 explicit typing).
	TokenType = "flashgate-admission+jwt"
	// Alg is the only signing algorithm (RFC 8037 EdDSA, Ed25519 keys).
	Alg = "EdDSA"
	// ProductClaim is the private claim carrying the product (room id).
	ProductClaim = "product"
)

// Header is an admission token's JOSE protected header: exactly
// {"alg":"EdDSA","kid":…,"typ":"flashgate-admission+jwt"} in that order.
type Header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// NewHeader is the protected header for the key kid (an RFC 7638 thumbprint).
func NewHeader(kid string) Header { return Header{Alg: Alg, Kid: kid, Typ: TokenType} }

// JSON is h's serialisation (the bytes that are base64url-encoded and signed).
func (h Header) JSON() []byte {
	b, _ := json.Marshal(h) // strings only: cannot fail
	return b
}

// Claims is an admission token's payload (RFC 7519 §4.1 registered claims
// plus ProductClaim). Field order is fixed, so the same admission always
// serialises, and so signs, to the same bytes. Times are seconds since the
// epoch (NumericDate).
type Claims struct {
	Iss     string `json:"iss"`
	Aud     string `json:"aud"`
	Sub     string `json:"sub"`     // the user id
	Product string `json:"product"` // ProductClaim: the room id
	Jti     string `json:"jti"`     // the admission id (AdmissionID.String)
	Iat     int64  `json:"iat"`     // s: the admission time, floored
	Exp     int64  `json:"exp"`     // s: the active entry's expiry, floored
}

// NewClaims returns the claims of an admission of user to product with id
// jti, issued at iat and expiring at exp (both floored to whole seconds).
func NewClaims(iss, aud, user, product, jti string, iat, exp time.Time) Claims {
	return Claims{Iss: iss, Aud: aud, Sub: user, Product: product, Jti: jti, Iat: iat.Unix(), Exp: exp.Unix()}
}

// JSON is c's serialisation (the JWS payload).
func (c Claims) JSON() []byte {
	b, _ := json.Marshal(c) // strings and integers only: cannot fail
	return b
}
