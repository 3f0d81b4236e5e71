package verifier

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
)

// StaticKeys is a fixed KeySet: kid → Ed25519 public key. It is immutable
// and safe for concurrent use. Build one with ParseJWKS or NewStaticKeys.
type StaticKeys struct {
	keys map[string]ed25519.PublicKey
	ids  []string // sorted
}

var _ KeySet = (*StaticKeys)(nil)

// NewStaticKeys returns a KeySet holding a copy of keys.
func NewStaticKeys(keys map[string]ed25519.PublicKey) *StaticKeys {
	s := &StaticKeys{keys: make(map[string]ed25519.PublicKey, len(keys))}
	for kid, pub := range keys {
		s.keys[kid] = append(ed25519.PublicKey(nil), pub...)
		s.ids = append(s.ids, kid)
	}
	sort.Strings(s.ids)
	return s
}

// PublicKey returns the key named kid, or ErrUnknownKey wrapped with the
// (quoted, truncated) kid.
func (s *StaticKeys) PublicKey(_ context.Context, kid string) (ed25519.PublicKey, error) {
	if pub, ok := s.keys[kid]; ok {
		return pub, nil
	}
	if len(kid) > 64 {
		kid = kid[:64] + "…"
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownKey, kid)
}

// KeyIDs returns the key ids, sorted.
func (s *StaticKeys) KeyIDs() []string { return append([]string(nil), s.ids...) }

// maxJWKSSize bounds the JWK Set document ParseJWKS accepts.
const maxJWKSSize = 1 << 20

// ParseJWKS parses a JWK Set document (RFC 7517 §5), {"keys":[…]}, into a
// StaticKeys. It uses the package's strict JSON scanner (no encoding/json),
// so duplicate member names and invalid JSON are errors.
//
// A key is used when it has kty "OKP", crv "Ed25519" (RFC 8037 §2), an x of
// exactly 32 bytes in strict unpadded base64url and a non-empty string kid of
// at most 128 bytes. Keys of another kty or crv, with use other than "sig",
// with alg present and other than "EdDSA", or with key_ops lacking "verify"
// are skipped. It is an error when any key carries the private member "d"
// (a public JWK Set must never hold private keys), when an Ed25519 key is
// malformed, when two used keys share a kid, or when no key is usable.
func ParseJWKS(data []byte) (*StaticKeys, error) {
	if len(data) > maxJWKSSize {
		return nil, fmt.Errorf("verifier: jwks: document larger than %d bytes", maxJWKSSize)
	}
	var top [maxMembers]member
	members, err := parseTopObject(data, top[:0])
	if err != nil {
		return nil, fmt.Errorf("verifier: jwks: %v", err)
	}
	var keysM *member
	var scratch [32]byte
	for k := range members {
		if string(nameOf(data, &members[k], &scratch)) == "keys" {
			keysM = &members[k]
		}
	}
	if keysM == nil || keysM.kind != kindArray {
		return nil, errors.New(`verifier: jwks: "keys" must be an array`)
	}
	s := &StaticKeys{keys: make(map[string]ed25519.PublicKey)}
	index := 0
	_, err = parseArray(data, int(keysM.val.start), 0, func(kind byte, sp span, _ bool) error {
		defer func() { index++ }()
		if kind != kindObject {
			return fmt.Errorf("keys[%d] is not an object", index)
		}
		kid, pub, err := parseJWK(sp.of(data))
		if err != nil {
			return fmt.Errorf("keys[%d]: %v", index, err)
		}
		if pub == nil {
			return nil // skipped
		}
		if _, dup := s.keys[kid]; dup {
			return fmt.Errorf("keys[%d]: duplicate kid %q", index, kid)
		}
		s.keys[kid] = pub
		s.ids = append(s.ids, kid)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verifier: jwks: %v", err)
	}
	if len(s.keys) == 0 {
		return nil, errors.New("verifier: jwks: no usable Ed25519 signature key")
	}
	sort.Strings(s.ids)
	return s, nil
}

// parseJWK returns the kid and key of one JWK, or a nil key when the JWK is
// to be skipped.
func parseJWK(b []byte) (string, ed25519.PublicKey, error) {
	var mem [maxMembers]member
	members, err := parseTopObject(b, mem[:0])
	if err != nil {
		return "", nil, err
	}
	var kty, crv, x, kid, use, alg, ops *member
	var scratch [32]byte
	for k := range members {
		m := &members[k]
		switch string(nameOf(b, m, &scratch)) {
		case "d":
			return "", nil, errors.New(`private key member "d" in a public key set`)
		case "kty":
			kty = m
		case "crv":
			crv = m
		case "x":
			x = m
		case "kid":
			kid = m
		case "use":
			use = m
		case "alg":
			alg = m
		case "key_ops":
			ops = m
		}
	}
	if kty == nil || kty.kind != kindString {
		return "", nil, errors.New(`"kty" missing or not a string`)
	}
	if !stringIs(b, kty, "OKP") || !stringIs(b, crv, "Ed25519") {
		return "", nil, nil
	}
	if use != nil && !stringIs(b, use, "sig") {
		return "", nil, nil
	}
	if alg != nil && !stringIs(b, alg, Alg) {
		return "", nil, nil
	}
	if ops != nil {
		if ops.kind != kindArray {
			return "", nil, errors.New(`"key_ops" is not an array`)
		}
		verify := false
		_, err := parseArray(b, int(ops.val.start), 0, func(kind byte, sp span, esc bool) error {
			if kind != kindString {
				return errors.New(`"key_ops" member is not a string`)
			}
			if stringIs(b, &member{kind: kindString, val: sp, valEsc: esc}, "verify") {
				verify = true
			}
			return nil
		})
		if err != nil {
			return "", nil, err
		}
		if !verify {
			return "", nil, nil
		}
	}
	if x == nil || x.kind != kindString || x.valEsc {
		return "", nil, errors.New(`Ed25519 key without a base64url string "x"`)
	}
	var pub [ed25519.PublicKeySize + 3]byte
	if n, ok := decodeSegment(pub[:], string(x.val.of(b))); !ok || n != ed25519.PublicKeySize {
		return "", nil, errors.New(`"x" is not 32 bytes of strict base64url`)
	}
	if kid == nil || kid.kind != kindString {
		return "", nil, errors.New(`Ed25519 key without a string "kid"`)
	}
	if l := stringLen(b, kid); l == 0 || l > maxKIDLen {
		return "", nil, fmt.Errorf(`"kid" length %d outside [1, %d]`, l, maxKIDLen)
	}
	return stringValue(b, kid), append(ed25519.PublicKey(nil), pub[:ed25519.PublicKeySize]...), nil
}
