package keys

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha512"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"filippo.io/edwards25519"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/verifier"
)

// resignCase is one (message, signature) the re-sign fast path must answer
// exactly as crypto/ed25519.Verify.
type resignCase struct {
	name string
	msg  []byte
	sig  [ed25519.SignatureSize]byte
}

// testKey returns a ring key built from a fixed seed (newKey: the issuer's
// path for generated and loaded keys).
func testKey(t testing.TB, seed byte) *key {
	t.Helper()
	return newKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)), StatusActive, time.Now(), time.Time{})
}

// signWithNonce returns a valid Ed25519 signature of msg under priv made
// with a random nonce instead of RFC 8032's deterministic one (§5.1.6 with
// r random): R = [r]B, S = r + H(R ‖ A ‖ M)·a mod L, a the clamped scalar of
// SHA-512(seed)[:32]. ed25519.Sign never produces it, so only the full
// verification can accept it.
func signWithNonce(t testing.TB, priv ed25519.PrivateKey, msg []byte, rnd *rand.Rand) [ed25519.SignatureSize]byte {
	t.Helper()
	h := sha512.Sum512(priv.Seed())
	a, err := new(edwards25519.Scalar).SetBytesWithClamping(h[:32])
	require.NoError(t, err)
	var wide [64]byte
	for i := range wide {
		wide[i] = byte(rnd.Uint32())
	}
	r, err := new(edwards25519.Scalar).SetUniformBytes(wide[:])
	require.NoError(t, err)
	R := new(edwards25519.Point).ScalarBaseMult(r).Bytes()
	kh := sha512.New()
	kh.Write(R)
	kh.Write(priv.Public().(ed25519.PublicKey))
	kh.Write(msg)
	k, err := new(edwards25519.Scalar).SetUniformBytes(kh.Sum(nil))
	require.NoError(t, err)
	S := new(edwards25519.Scalar).MultiplyAdd(k, a, r)
	var sig [ed25519.SignatureSize]byte
	copy(sig[:32], R)
	copy(sig[32:], S.Bytes())
	return sig
}

// groupOrder is L = 2^252 + 27742317777372353535851937790883648493 (RFC 8032 §5.1).
var groupOrder, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)

// plusL returns sig with S replaced by S + L (little-endian): the same
// scalar, non-canonically encoded, which RFC 8032 §5.1.7 rejects (S ≥ L).
func plusL(sig [ed25519.SignatureSize]byte) [ed25519.SignatureSize]byte {
	be := make([]byte, 32)
	for i := range 32 {
		be[31-i] = sig[32+i]
	}
	s := new(big.Int).SetBytes(be)
	s.Add(s, groupOrder)
	s.FillBytes(be) // S < L < 2^253, so S + L < 2^256 fits
	for i := range 32 {
		sig[32+i] = be[31-i]
	}
	return sig
}

// resignCases builds the differential cases for k: valid signatures of
// random, empty and long messages; each valid signature with one bit
// flipped per byte (every bit for the first message); a valid signature
// made with another nonce (and its bit flips); S + L of both; the message
// changed; a signature of another key.
func resignCases(t testing.TB, k *key, other *key) []resignCase {
	t.Helper()
	rnd := rand.New(rand.NewPCG(13, 8032))
	msgs := [][]byte{nil, {}, []byte("eyJhbGciOiJFZERTQSJ9.eyJuIjoxfQ"), make([]byte, 1<<16)}
	for range 4 {
		m := make([]byte, rnd.IntN(300))
		for i := range m {
			m[i] = byte(rnd.Uint32())
		}
		msgs = append(msgs, m)
	}
	for i := range msgs[3] {
		msgs[3][i] = byte(rnd.Uint32())
	}
	var cs []resignCase
	for i, m := range msgs {
		valid := [ed25519.SignatureSize]byte(ed25519.Sign(k.priv, m))
		nonce := signWithNonce(t, k.priv, m, rnd)
		require.NotEqual(t, valid, nonce, "the random nonce gave RFC 8032's")
		cs = append(cs,
			resignCase{"valid", m, valid},
			resignCase{"other nonce", m, nonce},
			resignCase{"S+L", m, plusL(valid)},
			resignCase{"other nonce S+L", m, plusL(nonce)},
			resignCase{"other key", m, [ed25519.SignatureSize]byte(ed25519.Sign(other.priv, m))},
		)
		changed := append([]byte{}, m...)
		if len(changed) == 0 {
			changed = []byte{0}
		} else {
			changed[rnd.IntN(len(changed))] ^= 1 << rnd.IntN(8)
		}
		cs = append(cs, resignCase{"message changed", changed, valid})
		for b := range ed25519.SignatureSize {
			bits := []int{rnd.IntN(8)}
			if i == 0 {
				bits = []int{0, 1, 2, 3, 4, 5, 6, 7}
			}
			for _, bit := range bits {
				s, n := valid, nonce
				s[b] ^= 1 << bit
				n[b] ^= 1 << bit
				cs = append(cs, resignCase{"valid, bit flipped", m, s}, resignCase{"other nonce, bit flipped", m, n})
			}
		}
	}
	return cs
}

// TestResignVerifyMatchesEd25519: the ring key's PreparedKey answers
// exactly as crypto/ed25519.Verify on every case of resignCases, and the
// cases contain both answers, including a valid signature the re-signed
// one does not match (the fallback) and an S ≥ L one.
func TestResignVerifyMatchesEd25519(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	pk := k.prep
	require.Equal(t, k.pub, pk.PublicKey())
	valid := map[string]int{}
	for _, c := range resignCases(t, k, other) {
		want := ed25519.Verify(k.pub, c.msg, c.sig[:])
		require.Equal(t, want, pk.Verify(c.msg, c.sig), "%s: msg %d bytes, sig %x", c.name, len(c.msg), c.sig)
		if want {
			valid[c.name]++
		}
	}
	assert.Equal(t, map[string]int{"valid": 8, "other nonce": 8}, valid,
		"exactly the valid and the other-nonce signatures verify")
}

// FuzzResignVerify: for any message and 64 bytes, the ring key's Verify is
// crypto/ed25519.Verify, and the message's own signature verifies. Seeded
// with resignCases.
func FuzzResignVerify(f *testing.F) {
	k, other := testKey(f, 1), testKey(f, 2)
	for _, c := range resignCases(f, k, other) {
		if len(c.msg) <= 1024 {
			f.Add(c.msg, c.sig[:])
		}
	}
	f.Fuzz(func(t *testing.T, msg, raw []byte) {
		var sig [ed25519.SignatureSize]byte
		copy(sig[:], raw)
		if got, want := k.prep.Verify(msg, sig), ed25519.Verify(k.pub, msg, sig[:]); got != want {
			t.Fatalf("msg %x sig %x: ring key %v, crypto/ed25519 %v", msg, sig, got, want)
		}
		if !k.prep.Verify(msg, [ed25519.SignatureSize]byte(ed25519.Sign(k.priv, msg))) {
			t.Fatalf("msg %x: own signature refused", msg)
		}
	})
}

// TestNewKeyRebuildsPublicHalf: a private key whose second half is not its
// seed's public key (ed25519.PrivateKey is seed ‖ pub, and Sign hashes the
// pub half as given) is rebuilt from its seed, so the key's pub is the one
// the seed signs for and the re-sign fast path never accepts a signature
// crypto/ed25519.Verify refuses.
func TestNewKeyRebuildsPublicHalf(t *testing.T) {
	good := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	wrong := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	mixed := append(append(ed25519.PrivateKey{}, good.Seed()...), wrong.Public().(ed25519.PublicKey)...)
	k := newKey(mixed, StatusActive, time.Now(), time.Time{})
	assert.Equal(t, good.Public(), k.pub)
	assert.Equal(t, Thumbprint(good.Public().(ed25519.PublicKey)), k.kid)
	msg := []byte("m")
	bogus := [ed25519.SignatureSize]byte(ed25519.Sign(mixed, msg)) // hashes the wrong pub
	require.False(t, ed25519.Verify(k.pub, msg, bogus[:]))
	assert.False(t, k.prep.Verify(msg, bogus))
	assert.True(t, k.prep.Verify(msg, [ed25519.SignatureSize]byte(ed25519.Sign(good, msg))))
}

// TestPreparedKeyAcrossRotation: a token the active key signed verifies
// through PreparedKey under its kid while the key is active, then retired
// (Rotate rebuilds the key: newKey), is refused under the new active kid,
// and its kid is unknown once the retired key passes retire_until.
func TestPreparedKeyAcrossRotation(t *testing.T) {
	t0 := time.Unix(1_767_225_600, 0)
	r, err := Generate(t0)
	require.NoError(t, err)
	clock := t0
	r.now = func() time.Time { return clock }
	ctx := context.Background()
	old := r.ActiveKeyID()
	tok, err := r.Sign([]byte(`{"n":1}`))
	require.NoError(t, err)
	dot := strings.LastIndexByte(tok, '.')
	msg := []byte(tok[:dot])
	sig, err := b64.DecodeString(tok[dot+1:])
	require.NoError(t, err)

	verify := func(kid string) (bool, error) {
		pk, err := r.PreparedKey(ctx, kid)
		if err != nil {
			return false, err
		}
		ok := pk.Verify(msg, [ed25519.SignatureSize]byte(sig))
		require.Equal(t, ed25519.Verify(pk.PublicKey(), msg, sig), ok, kid)
		return ok, nil
	}
	ok, err := verify(old)
	require.NoError(t, err)
	assert.True(t, ok, "active")

	require.NoError(t, r.Rotate(t0, 5*time.Minute))
	ok, err = verify(old)
	require.NoError(t, err)
	assert.True(t, ok, "retired, before retire_until")
	ok, err = verify(r.ActiveKeyID())
	require.NoError(t, err)
	assert.False(t, ok, "the new active key")

	clock = t0.Add(5*time.Minute + RetireMargin)
	_, err = verify(old)
	assert.ErrorIs(t, err, verifier.ErrUnknownKey, "retired, at retire_until")
}
