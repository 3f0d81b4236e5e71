// Package edcache verifies Ed25519 signatures with public keys decoded once.
//
// crypto/ed25519.Verify decodes the public key A (point decompression,
// RFC 8032 §5.1.3: a field square root) on every call. A Key holds −A
// decoded once and runs the rest of crypto/ed25519's verification
// unchanged, on filippo.io/edwards25519 — the same code as Go's internal
// edwards25519 package — so it accepts exactly the signatures
// crypto/ed25519.Verify accepts (the tests check it differentially:
// RFC 8032 and Wycheproof vectors, random and corrupted signatures,
// non-canonical and small-order encodings, a fuzz target).
//
// Key implements verifier.PreparedKey; Wrap turns any verifier.KeySet into
// a verifier.PreparedKeySet that caches one Key per kid. Package keys
// builds a Key with every ring key, so *keys.Ring and *keys.FileRing are
// PreparedKeySets themselves.
package edcache

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha512"
	"sync"

	"filippo.io/edwards25519"

	"github.com/flashgate/flashgate/verifier"
)

// Key is an Ed25519 public key decoded once. It is immutable and safe for
// concurrent use.
type Key struct {
	pub   ed25519.PublicKey  // the encoding as given (a copy)
	negA  edwards25519.Point // −A; meaningful only when valid
	valid bool               // pub is 32 bytes that decode to a point
}

var _ verifier.PreparedKey = (*Key)(nil)

// New decodes pub once. It never fails: a pub that is not 32 bytes or does
// not decode to a curve point (crypto/ed25519's rule: filippo.io/edwards25519
// Point.SetBytes, which accepts non-canonical y) gives a Key that verifies
// no signature, as crypto/ed25519.Verify rejects every signature under it
// (for a 32-byte pub; it panics on any other length).
func New(pub ed25519.PublicKey) *Key {
	k := &Key{pub: bytes.Clone(pub)}
	if len(pub) != ed25519.PublicKeySize {
		return k
	}
	var a edwards25519.Point
	if _, err := a.SetBytes(pub); err != nil {
		return k
	}
	k.negA.Negate(&a)
	k.valid = true
	return k
}

// PublicKey returns the key's encoding as given to New. The caller must not
// modify it.
func (k *Key) PublicKey() ed25519.PublicKey { return k.pub }

// Verify reports whether sig (R ‖ S, RFC 8032 §5.1.6) is a valid Ed25519
// signature of message under the key, exactly as
// crypto/ed25519.Verify(k.PublicKey(), message, sig[:]) does (RFC 8032
// §5.1.7 as Go implements it: S < L required, cofactorless equation
// checked by re-encoding R). It implements verifier.PreparedKey.
func (k *Key) Verify(message []byte, sig [ed25519.SignatureSize]byte) bool {
	if !k.valid {
		return false
	}
	// The steps of crypto/ed25519's verifyWithDom (pure Ed25519), with the
	// decoding of A and its negation done once in New.
	if sig[63]&224 != 0 {
		return false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(k.pub)
	h.Write(message)
	var digest [sha512.Size]byte
	var kS, s edwards25519.Scalar
	if _, err := kS.SetUniformBytes(h.Sum(digest[:0])); err != nil {
		return false // unreachable: the digest is 64 bytes
	}
	if _, err := s.SetCanonicalBytes(sig[32:]); err != nil {
		return false
	}
	// [S]B = R + [k]A  ⇔  [k](−A) + [S]B = R
	var r edwards25519.Point
	r.VarTimeDoubleScalarBaseMult(&kS, &k.negA, &s)
	return bytes.Equal(sig[:32], r.Bytes())
}

// VerifySlice is Verify for a signature given as a slice, with
// crypto/ed25519.Verify's signature: false when len(sig) != 64.
func (k *Key) VerifySlice(message, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize {
		return false
	}
	return k.Verify(message, [ed25519.SignatureSize]byte(sig))
}

// maxCached bounds a Set's cache: when a new key would exceed it the cache
// is emptied (a JWK Set holds a handful of keys; only keys the wrapped set
// returned are ever cached, so unknown kids cannot fill it).
const maxCached = 64

// Set is a verifier.PreparedKeySet over another KeySet (see Wrap). It is
// safe for concurrent use.
type Set struct {
	ks verifier.KeySet
	mu sync.RWMutex
	m  map[string]*Key // kid → the key last prepared for it
}

var _ verifier.PreparedKeySet = (*Set)(nil)

// Wrap returns a PreparedKeySet over ks: PublicKey is ks.PublicKey, and
// PreparedKey asks ks.PublicKey first (so every error and every rotation of
// ks is seen as before), then returns the Key cached for that kid if its
// bytes equal the key ks returned, else decodes and caches a new one. A
// key ks replaced is therefore never used. If ks already is a
// PreparedKeySet, Wrap returns it unchanged.
func Wrap(ks verifier.KeySet) verifier.PreparedKeySet {
	if p, ok := ks.(verifier.PreparedKeySet); ok {
		return p
	}
	return &Set{ks: ks, m: make(map[string]*Key)}
}

// PublicKey returns the wrapped set's answer.
func (s *Set) PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	return s.ks.PublicKey(ctx, kid)
}

// PreparedKey returns the wrapped set's key for kid, decoded once per kid
// and key bytes, or the wrapped set's error unchanged.
func (s *Set) PreparedKey(ctx context.Context, kid string) (verifier.PreparedKey, error) {
	pub, err := s.ks.PublicKey(ctx, kid)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	k := s.m[kid]
	s.mu.RUnlock()
	if k != nil && bytes.Equal(k.pub, pub) {
		return k, nil
	}
	k = New(pub)
	s.mu.Lock()
	if len(s.m) >= maxCached {
		clear(s.m)
	}
	s.m[kid] = k
	s.mu.Unlock()
	return k, nil
}
