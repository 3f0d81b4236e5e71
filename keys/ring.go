package keys

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/keys/edcache"
	"github.com/flashgate/flashgate/verifier"
)

// Status is the life-cycle state of a key in a Ring.
type Status string

// Key states, in the order a key passes through them.
const (
	// StatusNext: published in the JWKS, not yet signing. At most one per ring.
	StatusNext Status = "next"
	// StatusActive: signs every new token. Exactly one per ring.
	StatusActive Status = "active"
	// StatusRetired: no longer signs, still published until RetireUntil so that
	// tokens it signed keep verifying until they have expired.
	StatusRetired Status = "retired"
)

// RetireMargin is added to the maximum token lifetime when a key is retired:
// retire_until = rotation time + maxTokenLifetime + RetireMargin.
//
// It covers the verifier's largest clock leeway (verifier.MaxLeeway, 60 s),
// issuer replicas that keep signing with the old key until they notice the
// rotated file (FileOptions.CheckEvery, default 5 s) and modest clock skew
// between the machine that rotates and the replicas.
const RetireMargin = verifier.MaxLeeway + time.Minute

// Errors returned by this package. Compare with errors.Is; details are wrapped.
var (
	// ErrInvalidRing: a key ring (file or in memory) breaks a ring rule —
	// not exactly one active key, several next keys, a key that is not
	// Ed25519, a kid that is not the key's RFC 7638 thumbprint, ….
	ErrInvalidRing = errors.New("keys: invalid key ring")
	// ErrInsecureFile: the key ring file is readable or writable by others.
	ErrInsecureFile = errors.New("keys: key ring file permissions too open")
	// ErrNoNextKey: Rotate found no published next key to activate.
	ErrNoNextKey = errors.New("keys: no next key to activate")
	// ErrIsDirectory: the key ring path names a directory, not a file (a
	// mode check there would wrongly suggest chmod 600).
	ErrIsDirectory = errors.New("keys: key ring path is a directory")
)

// KeyInfo describes one key of a ring for listings (the CLI). It holds no
// key material.
type KeyInfo struct {
	ID      string    `json:"kid"`     // RFC 7638 thumbprint
	Status  Status    `json:"status"`  // next, active or retired
	Created time.Time `json:"created"` // second precision
	// RetireUntil is set for retired keys only: the key is dropped from the
	// ring and the public JWKS once this instant is reached.
	RetireUntil time.Time `json:"retire_until,omitzero"`
}

// key is one Ed25519 key of a ring. Keys are immutable once built; a ring
// changes by replacing its slice of keys.
type key struct {
	kid         string
	priv        ed25519.PrivateKey
	pub         ed25519.PublicKey
	prep        *resignKey // pub decoded once and priv, for PreparedKey
	status      Status
	created     time.Time
	retireUntil time.Time
	header      string // base64url of the protected header, precomputed for Sign
}

// newKey builds a key from priv. The private key is rebuilt from its seed
// (ed25519.NewKeyFromSeed), so pub — its second half — is always the public
// key of the seed that signs, even for a priv whose halves disagree: the
// re-sign fast path of resignKey relies on it (a signature made with a
// mismatched public half would not verify under pub, yet would match the
// re-signed one). Loaded keys already agree (parsePrivateKey: jwx checks
// that x matches d), so this changes nothing for them.
func newKey(priv ed25519.PrivateKey, status Status, created, retireUntil time.Time) *key {
	priv = ed25519.NewKeyFromSeed(priv.Seed())
	pub := priv.Public().(ed25519.PublicKey)
	kid := Thumbprint(pub)
	hdr := flashgate.NewHeader(kid).JSON()
	return &key{
		kid:         kid,
		priv:        priv,
		pub:         pub,
		prep:        &resignKey{key: edcache.New(pub), priv: priv},
		status:      status,
		created:     created.Truncate(time.Second),
		retireUntil: retireUntil.Truncate(time.Second),
		header:      b64.EncodeToString(hdr),
	}
}

func generateKey(status Status, now time.Time) (*key, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("keys: generate Ed25519 key: %w", err)
	}
	return newKey(priv, status, now, time.Time{}), nil
}

// resignKey is the verifier.PreparedKey of a ring key: its public key
// decoded once (edcache.Key) and its private key, whose Public() is that
// public key (newKey). It is immutable and safe for concurrent use.
type resignKey struct {
	key  *edcache.Key
	priv ed25519.PrivateKey
}

var _ verifier.PreparedKey = (*resignKey)(nil)

// PublicKey returns the key's 32-byte encoding; the caller must not modify it.
func (k *resignKey) PublicKey() ed25519.PublicKey { return k.key.PublicKey() }

// Verify reports whether sig is a valid Ed25519 signature of message under
// the key, exactly as crypto/ed25519.Verify(k.PublicKey(), message, sig[:])
// (the verifier.PreparedKey contract), by re-signing first.
//
// Ed25519 signing is deterministic (RFC 8032 §5.1.6: the nonce is a hash
// of the private key's prefix and the message), so ed25519.Sign(priv,
// message) is one fixed signature, valid under the key, and it is the one
// every token the ring minted carries. Verify computes it and compares it
// with sig in constant time (crypto/subtle.ConstantTimeCompare: a
// variable-time compare would leak, byte by byte, the valid signature of a
// message the caller chose — a forgery); equal means valid. Otherwise it
// falls back to the full verification (edcache.Key.Verify, ≡
// crypto/ed25519.Verify), so a valid signature made with another nonce
// still verifies and an invalid one is still refused: the answer is
// Verify's for every input, only the cost differs.
//
// Cost (BenchmarkPreparedVerify, interleaved in one run): a signature the
// ring made costs one Sign, 0.45× a crypto/ed25519.Verify; any other
// signature costs Sign + the full verification, 1.37× a Verify — what an
// attacker sending junk signatures makes the issuer pay per request.
// verifier.Verify runs its cheap checks before the signature (size, shape,
// header, kid, the signature's encoding, the payload and its claims:
// verifier.Prepare), so only a token that passes them gets here. No
// allocation (0 allocs/op: Sign's 64-byte result stays on the stack).
func (k *resignKey) Verify(message []byte, sig [ed25519.SignatureSize]byte) bool {
	if subtle.ConstantTimeCompare(ed25519.Sign(k.priv, message), sig[:]) == 1 {
		return true
	}
	return k.key.Verify(message, sig)
}

// expired reports whether a retired key is past its retire_until at now.
func (k *key) expired(now time.Time) bool {
	return k.status == StatusRetired && !now.Before(k.retireUntil)
}

var b64 = base64.RawURLEncoding

// Thumbprint returns the RFC 7638 JWK thumbprint of an Ed25519 public key
// (RFC 8037 §2: members crv, kty, x in lexicographic order, SHA-256,
// base64url without padding). It is the kid of the key.
func Thumbprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + b64.EncodeToString(pub) + `"}`))
	return b64.EncodeToString(sum[:])
}

// Ring is a set of Ed25519 signing keys: exactly one active key that signs,
// at most one next key that is published but does not sign yet, and retired
// keys that are published until every token they signed has expired.
//
// All methods are safe for concurrent use.
type Ring struct {
	mu   sync.RWMutex
	keys []*key // ordered: active, next, retired (newest first)
	now  func() time.Time
}

var _ verifier.PreparedKeySet = (*Ring)(nil)

// Generate returns a new ring with one active key and one next key, both
// created at now. The next key is published from the start, so the first
// rotation activates a key that verifiers have already seen.
func Generate(now time.Time) (*Ring, error) {
	active, err := generateKey(StatusActive, now)
	if err != nil {
		return nil, err
	}
	next, err := generateKey(StatusNext, now)
	if err != nil {
		return nil, err
	}
	return newRing([]*key{active, next})
}

// newRing validates keys and returns a ring holding them in canonical order.
func newRing(ks []*key) (*Ring, error) {
	if err := validate(ks); err != nil {
		return nil, err
	}
	r := &Ring{now: time.Now}
	r.keys = sortKeys(ks)
	return r, nil
}

func validate(ks []*key) error {
	var active, next int
	seen := make(map[string]bool, len(ks))
	for _, k := range ks {
		if seen[k.kid] {
			return fmt.Errorf("%w: duplicate kid %q", ErrInvalidRing, k.kid)
		}
		seen[k.kid] = true
		switch k.status {
		case StatusActive:
			active++
		case StatusNext:
			next++
		case StatusRetired:
			if k.retireUntil.IsZero() {
				return fmt.Errorf("%w: retired key %q has no flashgate_retire_until", ErrInvalidRing, k.kid)
			}
		default:
			return fmt.Errorf("%w: key %q has unknown status %q", ErrInvalidRing, k.kid, k.status)
		}
	}
	if active != 1 {
		return fmt.Errorf("%w: %d active keys, want exactly 1", ErrInvalidRing, active)
	}
	if next > 1 {
		return fmt.Errorf("%w: %d next keys, want at most 1", ErrInvalidRing, next)
	}
	return nil
}

func sortKeys(ks []*key) []*key {
	rank := map[Status]int{StatusActive: 0, StatusNext: 1, StatusRetired: 2}
	out := slices.Clone(ks)
	slices.SortStableFunc(out, func(a, b *key) int {
		if d := rank[a.status] - rank[b.status]; d != 0 {
			return d
		}
		return b.created.Compare(a.created) // newest first
	})
	return out
}

// activeLocked returns the active key; the ring invariant guarantees one.
func (r *Ring) activeLocked() *key {
	for _, k := range r.keys {
		if k.status == StatusActive {
			return k
		}
	}
	panic("keys: ring without an active key") // unreachable: validated
}

// ActiveKeyID returns the kid of the key that signs.
func (r *Ring) ActiveKeyID() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.activeLocked().kid
}

// Keys lists every key of the ring (active, next, retired newest first),
// including retired keys past their retire_until that the next Rotate will
// drop.
func (r *Ring) Keys() []KeyInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]KeyInfo, 0, len(r.keys))
	for _, k := range r.keys {
		out = append(out, KeyInfo{ID: k.kid, Status: k.status, Created: k.created, RetireUntil: k.retireUntil})
	}
	return out
}

// Sign returns a JWS compact serialization (RFC 7515 §7.1) of payload signed
// with the active key. The protected header is exactly
// {"alg":"EdDSA","kid":<active kid>,"typ":"flashgate-admission+jwt"}.
// Ed25519 is deterministic: the same payload and key give the same token.
// The payload is signed as given; it is normally the JSON claims set.
func (r *Ring) Sign(payload []byte) (string, error) {
	r.mu.RLock()
	k := r.activeLocked()
	r.mu.RUnlock()
	return signCompact(k.priv, k.header, payload), nil
}

// SignInvite returns a JWS compact serialization of an invite's payload
// (flashgate.InviteClaims.JSON) signed with the active key, with the
// protected header exactly {"alg":"EdDSA","kid":<active kid>,"typ":"flashgate-invite+jwt"}
// (flashgate.InviteHeader): the same keys as admission tokens, another type,
// so the verifier never accepts an invite as an admission token.
func (r *Ring) SignInvite(payload []byte) (string, error) {
	return r.signTyped(flashgate.InviteHeader, payload), nil
}

// SignReceipt returns a JWS compact serialization of a join receipt's
// payload (flashgate.ReceiptClaims.JSON) signed with the active key, with the
// protected header exactly {"alg":"EdDSA","kid":<active kid>,"typ":"fg-receipt+jwt"}
// (flashgate.ReceiptHeader): the admission keys, another type, so the
// verifier never accepts a receipt as an admission token.
func (r *Ring) SignReceipt(payload []byte) (string, error) {
	return r.signTyped(flashgate.ReceiptHeader, payload), nil
}

// SignBeacon returns a JWS compact serialization of a room beacon's payload
// (verifier.Beacon as JSON) signed with the active key, with the protected
// header exactly {"alg":"EdDSA","kid":<active kid>,"typ":"flashgate-beacon+jwt"}
// (flashgate.BeaconHeader): the admission keys, another type, so the
// verifier never accepts a beacon as an admission token.
func (r *Ring) SignBeacon(payload []byte) (string, error) {
	return r.signTyped(flashgate.BeaconHeader, payload), nil
}

// signTyped signs payload with the active key under the header hdr(kid).
func (r *Ring) signTyped(hdr func(kid string) flashgate.Header, payload []byte) string {
	r.mu.RLock()
	k := r.activeLocked()
	r.mu.RUnlock()
	return signCompact(k.priv, b64.EncodeToString(hdr(k.kid).JSON()), payload)
}

// signCompact builds header.payload.signature where header is already
// base64url encoded.
func signCompact(priv ed25519.PrivateKey, header string, payload []byte) string {
	n := len(header) + 1 + b64.EncodedLen(len(payload))
	buf := make([]byte, 0, n+1+b64.EncodedLen(ed25519.SignatureSize))
	buf = append(buf, header...)
	buf = append(buf, '.')
	buf = b64.AppendEncode(buf, payload)
	sig := ed25519.Sign(priv, buf[:n])
	buf = append(buf, '.')
	buf = b64.AppendEncode(buf, sig)
	return string(buf)
}

// PublicKey returns the public key named by kid: the active key, the next
// key, or a retired key before its retire_until. Any other kid gives an
// error wrapping verifier.ErrUnknownKey. The returned slice must not be
// modified. It implements verifier.KeySet.
func (r *Ring) PublicKey(_ context.Context, kid string) (ed25519.PublicKey, error) {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, k := range r.keys {
		if k.kid == kid && !k.expired(now) {
			return k.pub, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", verifier.ErrUnknownKey, kid)
}

// PreparedKey is PublicKey with the key decoded once (verifier.PreparedKeySet):
// the same kid rule and the same errors, and a key whose Verify answers
// exactly as crypto/ed25519.Verify. The decoded point is built with the
// ring's key (keys are immutable; Rotate and a FileRing reload build new
// ones), so a rotated or reloaded ring never verifies with a key it no
// longer holds.
//
// As the ring holds each key's private half, the returned key verifies by
// re-signing first (resignKey.Verify): a token this ring signed costs one
// Ed25519 Sign instead of a Verify (about half), anything else a Sign and a
// Verify; the answer is crypto/ed25519.Verify's either way. The compare of
// the re-signed signature with the token's is constant-time (crypto/subtle).
func (r *Ring) PreparedKey(_ context.Context, kid string) (verifier.PreparedKey, error) {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, k := range r.keys {
		if k.kid == kid && !k.expired(now) {
			return k.prep, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", verifier.ErrUnknownKey, kid)
}

// publicJWK is one member of the public JWK Set.
type publicJWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// PublicJWKS returns the public JWK Set (RFC 7517 §5) to serve at
// /.well-known/jwks.json: the active key, the next key and retired keys
// before their retire_until, each as {"kty":"OKP","crv":"Ed25519","x",
// "kid","use":"sig","alg":"EdDSA"}. It never contains private members.
func (r *Ring) PublicJWKS() ([]byte, error) {
	now := r.now()
	r.mu.RLock()
	set := struct {
		Keys []publicJWK `json:"keys"`
	}{Keys: make([]publicJWK, 0, len(r.keys))}
	for _, k := range r.keys {
		if k.expired(now) {
			continue
		}
		set.Keys = append(set.Keys, publicJWK{
			Kty: "OKP", Crv: "Ed25519", X: b64.EncodeToString(k.pub),
			Kid: k.kid, Use: "sig", Alg: verifier.Alg,
		})
	}
	r.mu.RUnlock()
	return json.Marshal(set)
}

// Rotate moves the ring one step along the rotation timeline, at time now:
//
//   - retired keys whose retire_until ≤ now are dropped;
//   - the active key becomes retired with
//     retire_until = now + maxTokenLifetime + RetireMargin, so it stays
//     published until every token it signed has expired;
//   - the next key becomes active (it has been published since the previous
//     rotation or since Generate);
//   - a fresh next key is generated and published, to be activated by the
//     following rotation.
//
// maxTokenLifetime is the longest lifetime (exp − iat) of any token the
// active key may have signed, e.g. the issuer's maximum session duration;
// it must be positive.
//
// Rotate never activates a key that has not been published: when the ring
// has no next key (a hand-edited file), it returns an error wrapping
// ErrNoNextKey and leaves the ring unchanged. Add a next key with
// AddNextKey, save and publish the ring, wait until verifiers have refreshed
// their JWKS, then rotate again.
//
// Rotate changes the ring in memory only; call Save to persist it.
func (r *Ring) Rotate(now time.Time, maxTokenLifetime time.Duration) error {
	if maxTokenLifetime <= 0 {
		return fmt.Errorf("keys: rotate: maxTokenLifetime must be positive, got %s", maxTokenLifetime)
	}
	fresh, err := generateKey(StatusNext, now)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var next *key
	for _, k := range r.keys {
		if k.status == StatusNext {
			next = k
		}
	}
	if next == nil {
		return fmt.Errorf("%w: the ring has no published next key; "+
			"add one (AddNextKey; flashgate keys add-next), save and publish it, and rotate again once verifiers have refreshed their JWKS", ErrNoNextKey)
	}
	retireUntil := now.Add(maxTokenLifetime + RetireMargin)
	ks := make([]*key, 0, len(r.keys)+1)
	for _, k := range r.keys {
		switch {
		case k.expired(now):
			// dropped: every token it signed has expired
		case k.status == StatusActive:
			ks = append(ks, newKey(k.priv, StatusRetired, k.created, retireUntil))
		case k.status == StatusNext:
			ks = append(ks, newKey(k.priv, StatusActive, k.created, time.Time{}))
		default:
			ks = append(ks, k)
		}
	}
	ks = append(ks, fresh)
	if err := validate(ks); err != nil {
		return err // unreachable: the transition preserves the invariants
	}
	r.keys = sortKeys(ks)
	return nil
}

// AddNextKey generates a next key created at now, for a ring that has none
// (see Rotate). It returns an error if the ring already has a next key.
func (r *Ring) AddNextKey(now time.Time) error {
	fresh, err := generateKey(StatusNext, now)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.keys {
		if k.status == StatusNext {
			return fmt.Errorf("keys: ring already has a next key %q", k.kid)
		}
	}
	r.keys = sortKeys(append(slices.Clone(r.keys), fresh))
	return nil
}
