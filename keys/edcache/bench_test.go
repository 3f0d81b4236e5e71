package edcache_test

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testing/ringtest"
	"github.com/flashgate/flashgate/keys/edcache"
	"github.com/flashgate/flashgate/verifier"
)

// BenchmarkVerifyPreparedVsEd25519 interleaves, in one loop so that all
// see the same machine load, on a real admission token signed by a key
// ring (keys.Generate, ring.Sign: the issuer's own path):
//
//   - ring: Verify over the *keys.Ring, a PreparedKeySet — what the
//     server's /v1/complete runs;
//   - static: Verify over verifier.StaticKeys holding the same key, i.e.
//     crypto/ed25519.Verify decoding the key on every call;
//   - key: edcache.Key.Verify alone, the prepared signature check;
//   - ed25519: crypto/ed25519.Verify alone, the physical limit of static.
//
// It reports ring/static (the speedup of Verify), key/ed25519 (the
// speedup of the signature check) and each one's ns/op.
func BenchmarkVerifyPreparedVsEd25519(b *testing.B) {
	now := time.Unix(1763680060, 0)
	t := ringtest.NewToken(b, now)
	ring, kid, tok, input, sig := t.Ring, t.Kid, t.Raw, t.Input, t.Sig[:]
	pub, err := ring.PublicKey(context.Background(), kid)
	if err != nil {
		b.Fatal(err)
	}
	cfg := verifier.Config{Issuer: ringtest.Issuer, Audience: ringtest.Audience, Now: func() time.Time { return now }}
	prepared, err := verifier.New(ring, cfg)
	if err != nil {
		b.Fatal(err)
	}
	plain, err := verifier.New(verifier.NewStaticKeys(map[string]ed25519.PublicKey{kid: pub}), cfg)
	if err != nil {
		b.Fatal(err)
	}
	key := edcache.New(pub)
	want := verifier.Expect{Product: "sku-1"}
	var tRing, tStatic, tKey, tRaw time.Duration
	i := 0
	for b.Loop() {
		// Alternate which of each pair runs first, so that neither always
		// inherits the other's cache state.
		i++
		if i%2 == 0 {
			tRing += timeVerify(b, prepared, tok, want)
			tStatic += timeVerify(b, plain, tok, want)
			tKey += timeSig(b, func() bool { return key.Verify(input, [64]byte(sig)) })
			tRaw += timeSig(b, func() bool { return ed25519.Verify(pub, input, sig) })
		} else {
			tStatic += timeVerify(b, plain, tok, want)
			tRing += timeVerify(b, prepared, tok, want)
			tRaw += timeSig(b, func() bool { return ed25519.Verify(pub, input, sig) })
			tKey += timeSig(b, func() bool { return key.Verify(input, [64]byte(sig)) })
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tRing)/float64(tStatic), "ring/static")
	b.ReportMetric(float64(tKey)/float64(tRaw), "key/ed25519")
	b.ReportMetric(float64(tRing)/n, "ring-ns/op")
	b.ReportMetric(float64(tStatic)/n, "static-ns/op")
	b.ReportMetric(float64(tKey)/n, "key-ns/op")
	b.ReportMetric(float64(tRaw)/n, "ed25519-ns/op")
}

// BenchmarkDecode is what a Key saves per verification: decoding A (a
// field square root) and negating it.
func BenchmarkDecode(b *testing.B) {
	pub := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	b.ReportAllocs()
	for b.Loop() {
		if edcache.New(pub) == nil {
			b.Fatal("nil")
		}
	}
}

func timeVerify(b *testing.B, v *verifier.Verifier, tok string, want verifier.Expect) time.Duration {
	t0 := time.Now()
	if _, err := v.Verify(context.Background(), tok, want); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

func timeSig(b *testing.B, verify func() bool) time.Duration {
	t0 := time.Now()
	if !verify() {
		b.Fatal("invalid")
	}
	return time.Since(t0)
}
