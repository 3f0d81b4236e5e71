// Package keys owns flashgate's admission-token signing keys: an Ed25519
// key ring kept in a private JWK Set file, the public JWK Set served at
// /.well-known/jwks.json, key rotation and signing. Order services that
// only verify fetch the public JWK Set with package verifier/remote.
//
// # Key ring file
//
// The ring is a private JWK Set (RFC 7517 §5) of Ed25519 keys (RFC 8037:
// kty OKP, crv Ed25519, public x, private seed d). Each key carries three
// private members:
//
//   - "flashgate_status": "next", "active" or "retired";
//   - "flashgate_created": creation time, Unix seconds;
//   - "flashgate_retire_until": retired keys only, Unix seconds; the key is
//     left out of the public JWK Set and of PublicKey from this instant and
//     dropped from the ring by the next Rotate.
//
// Example (d shortened):
//
//	{
//	  "keys": [
//	    {
//	      "kty": "OKP", "crv": "Ed25519",
//	      "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
//	      "d": "nWGxne_9WmC6hEr0…",
//	      "kid": "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k",
//	      "use": "sig", "alg": "EdDSA",
//	      "flashgate_status": "active",
//	      "flashgate_created": 1767225600
//	    },
//	    { …, "flashgate_status": "next", "flashgate_created": 1767225600 },
//	    { …, "flashgate_status": "retired", "flashgate_created": 1764547200,
//	      "flashgate_retire_until": 1767226620 }
//	  ]
//	}
//
// A ring has exactly one active key (it signs), at most one next key and
// any number of retired keys. Save writes the file atomically (temporary
// file, fsync, rename) with mode 0600. Load refuses a file that other users
// may access (mode & 0o007 ≠ 0, error ErrInsecureFile) and only warns when
// the group may (Kubernetes Secret volumes with fsGroup); it also refuses
// rings that break the rules above, keys that are not Ed25519 private keys
// and kids that are not thumbprints (ErrInvalidRing).
//
// # Key IDs
//
// The kid of a key is its RFC 7638 JWK thumbprint: SHA-256 over
// {"crv":"Ed25519","kty":"OKP","x":"<x>"} (required members, lexicographic
// order, no white space), base64url without padding; see Thumbprint. A kid
// therefore names exactly one public key and can be recomputed by anyone.
//
// # Rotation timeline
//
// The next key is published before it signs; a retired key is kept until
// every token it signed has expired:
//
//	Generate(t0)          active A, next B          JWKS: A B
//	Rotate(t1, L)         active B, next C,         JWKS: B C A
//	                      retired A until t1+L+RetireMargin
//	Rotate(t2, L)         active C, next D,         JWKS: C D B (+A while t2 < its retire_until)
//
// L is the longest token lifetime (exp − iat) the issuer mints.
// RetireMargin (2 min) covers the verifiers' clock leeway (at most 60 s)
// and replicas that keep signing with the old key until they notice the
// new file (FileOptions.CheckEvery). Rotate never activates a key that was
// not published: a ring without a next key (hand-edited) makes Rotate fail
// with ErrNoNextKey; add one with AddNextKey, save, wait until verifiers
// have refreshed their JWKS, and rotate again. Leave at least one JWKS cache
// lifetime between two rotations, so that every verifier has seen the next
// key before it signs.
//
// Running issuer replicas use a FileRing, which re-checks the file at most
// every FileOptions.CheckEvery (default 5 s) on use and reloads it when it
// changed, so `flashgate keys rotate` against the shared file reaches all
// replicas without a restart. A reload that fails keeps the previous ring.
//
// # Tokens
//
// Ring.Sign produces JWS compact serializations with the protected header
// {"alg":"EdDSA","kid":<kid>,"typ":"flashgate-admission+jwt"} (verifier.Alg,
// verifier.TokenType). Ed25519 signatures are deterministic.
package keys
