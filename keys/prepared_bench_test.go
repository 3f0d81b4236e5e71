package keys_test

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testing/ringtest"
	"github.com/flashgate/flashgate/keys/edcache"
)

// BenchmarkPreparedVerify compares, on a real admission token the ring
// signed (ring.Sign: the issuer's path), the signature checks the issuer's
// /v1/complete can run, in one run so that their ratios can be compared:
//
//   - ed25519.Verify: crypto/ed25519.Verify, decoding the key each call;
//   - edcache: edcache.Key.Verify, the key decoded once (no private key);
//   - ring-valid: the ring's PreparedKey (re-sign, constant-time compare)
//     on the token's own signature — the common case;
//   - ring-invalid: the same with one bit of R flipped, which pays the
//     re-sign and the full verification;
//   - ed25519.Sign: crypto/ed25519.Sign, the physical limit of ring-valid;
//   - interleaved: ring-valid, ring-invalid and ed25519.Verify in one loop
//     (the same machine load for all three), reporting valid/verify and
//     invalid/verify.
func BenchmarkPreparedVerify(b *testing.B) {
	t := ringtest.NewToken(b, time.Unix(1763680060, 0))
	pk, err := t.Ring.PreparedKey(context.Background(), t.Kid)
	if err != nil {
		b.Fatal(err)
	}
	pub, msg, sig := pk.PublicKey(), t.Input, t.Sig
	bad := sig
	bad[0] ^= 1
	key := edcache.New(pub)
	// Only the signing benchmark needs a private key; an unrelated one
	// costs the same.
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	check := func(b *testing.B, got, want bool) {
		if got != want {
			b.Fatalf("verified %v, want %v", got, want)
		}
	}
	b.Run("ed25519.Verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			check(b, ed25519.Verify(pub, msg, sig[:]), true)
		}
	})
	b.Run("edcache", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			check(b, key.Verify(msg, sig), true)
		}
	})
	b.Run("ring-valid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			check(b, pk.Verify(msg, sig), true)
		}
	})
	b.Run("ring-invalid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			check(b, pk.Verify(msg, bad), false)
		}
	})
	b.Run("ed25519.Sign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(ed25519.Sign(priv, msg)) != ed25519.SignatureSize {
				b.Fatal("short signature")
			}
		}
	})
	b.Run("interleaved", func(b *testing.B) {
		var tValid, tInvalid, tVerify time.Duration
		for b.Loop() {
			t0 := time.Now()
			check(b, pk.Verify(msg, sig), true)
			t1 := time.Now()
			check(b, pk.Verify(msg, bad), false)
			t2 := time.Now()
			check(b, ed25519.Verify(pub, msg, sig[:]), true)
			t3 := time.Now()
			tValid += t1.Sub(t0)
			tInvalid += t2.Sub(t1)
			tVerify += t3.Sub(t2)
		}
		b.ReportMetric(float64(tValid)/float64(tVerify), "valid/verify")
		b.ReportMetric(float64(tInvalid)/float64(tVerify), "invalid/verify")
	})
}
