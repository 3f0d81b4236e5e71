// Package verifier checks flashgate admission tokens offline: no Redis, no
// network, one Ed25519 signature verification per token.
//
// An admission token is a JWS in compact serialization (RFC 7515 §7.1)
// carrying a JWT claims set (RFC 7519):
//
//	header  {"alg":"EdDSA","kid":"<RFC 7638 thumbprint>","typ":"flashgate-admission+jwt"}
//	claims  {"iss":…,"aud":"<one string>","sub":"<user>","product":"<room>",
//	         "jti":"<admission id>","iat":<int>,"exp":<int>[,"nbf":<int>]}
//
// # What Verify checks, in order
//
// The order is fixed and cheapest first; the first failure wins and is
// reported as one sentinel error (ErrTooLarge … ErrUnavailable, see
// errors.go) whose Code is stable across the Go API, the wasm ABI and the
// CLI. Everything before the signature is parsing and policy on the header;
// every claim is checked only after the signature verified, so a forged
// token reports ErrBadSignature whatever else is wrong with it.
//
//  1. size ≤ MaxTokenSize (4 KiB), before any decoding;
//  2. compact form only: exactly three non-empty segments, every byte in the
//     base64url alphabet (no JSON serialization, no whitespace, no padding);
//  3. header: strict base64url (RFC 4648 §5 unpadded, non-zero trailing bits
//     rejected), one JSON object, no duplicate member names (compared after
//     unescaping);
//  4. alg exactly "EdDSA" (RFC 8037 §3.1). The algorithm is fixed by the key
//     type — every key is Ed25519 — and never chosen by the token, so "none"
//     and HMAC-with-the-public-key confusion cannot occur (RFC 8725 §2.1,
//     §3.1);
//  5. none of jwk, jku, x5u, x5c, x5t, x5t#S256, crit, b64 (keys are never
//     taken from the token; no extensions are understood, RFC 7515 §4.1.11,
//     RFC 7797). Other header members are ignored;
//  6. typ exactly "flashgate-admission+jwt" (explicit typing, RFC 8725
//     §3.11), so no other JWT can be substituted for an admission token;
//  7. kid a non-empty string of at most 128 bytes that the KeySet knows;
//  8. a 64-byte Ed25519 signature over the raw "header.payload" bytes as
//     received (never a re-serialization), checked with crypto/ed25519,
//     which rejects non-canonical S ≥ L (RFC 8032 §5.1.7);
//  9. payload: strict base64url, one JSON object, no duplicate member names;
//  10. claim types: jti a non-empty string; exp and iat required, nbf
//     optional, each an integer written -?[0-9]+ (no fraction, no exponent)
//     with 0 < value < 2^53 (I-JSON, RFC 7493 §2.2); exp > iat;
//  11. iss == Config.Issuer; aud a single string == Config.Audience (arrays
//     are refused even with one element); product == Expect.Product (or
//     Config.Product); sub a non-empty string, == Expect.User when set;
//  12. exp − iat ≤ Config.MaxLifetime (default 15 min);
//  13. time: now ≥ exp + leeway is expired (exp == now is expired with no
//     leeway); iat > now + leeway or nbf > now + leeway is not yet valid;
//  14. only with Config.Directives (an edge directive source, such as
//     remote.Directives): iat < the room's not_before (Unix seconds, moved
//     by an operator's stop) is room_stopped; no directive document yet is
//     directives_unavailable (refused: never fail open).
//
// # Units
//
// Time claims are NumericDate values in whole Unix seconds (RFC 7519 §2).
// "now" is Config.Now() truncated to seconds; Config.Leeway (≤ 60 s) and
// Config.MaxLifetime are used in whole seconds, rounded down. Sizes are in
// bytes of the raw token.
//
// # JSON
//
// Header and claims are read by a small hand-written strict JSON scanner
// (json.go), not encoding/json: it rejects duplicate names, invalid UTF-8,
// unpaired surrogates and trailing data, reads each document once, and
// does not allocate on the success path. A successful Verify allocates only
// the returned Token and its kid, sub and jti strings.
//
// # TinyGo
//
// The same code runs at the edge as a TinyGo-compiled wasm module (see
// wasm/). Therefore the core files of this package import the standard
// library only and avoid reflection (no encoding/json on the hot path).
// Files that need net/http or other packages TinyGo cannot build carry the
// build constraint //go:build !tinygo (middleware.go); a test enforces that
// every other file imports only standard-library packages.
//
// # Sources
//
//   - RFC 7515 (JWS): compact serialization, header parameters, Appendix A.
//   - RFC 7519 (JWT): registered claims, NumericDate.
//   - RFC 8725 (JWT BCP): §2.1 weak signatures and incorrect algorithms,
//     §3.1 perform algorithm verification, §3.11 use explicit typing.
//   - RFC 8037: EdDSA/Ed25519 in JOSE (OKP keys, "EdDSA").
//   - RFC 7493 (I-JSON): UTF-8, integer range, unique member names.
//   - RFC 4648 §3.5, §5: canonical base64url.
//   - Wycheproof ed25519_test.json and json_web_signature_test.json.
package verifier
