package edcache_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/keys"
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
	ring, err := keys.Generate(now)
	if err != nil {
		b.Fatal(err)
	}
	kid := ring.ActiveKeyID()
	tok, err := ring.Sign(flashgate.NewClaims("https://issuer.example", "orders", "user-12345", "sku-1",
		"1234.56.1763680000000", now.Add(-time.Minute), now.Add(4*time.Minute)).JSON())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	pub, err := ring.PublicKey(ctx, kid)
	if err != nil {
		b.Fatal(err)
	}
	cfg := verifier.Config{Issuer: "https://issuer.example", Audience: "orders", Now: func() time.Time { return now }}
	prepared, err := verifier.New(ring, cfg)
	if err != nil {
		b.Fatal(err)
	}
	plain, err := verifier.New(verifier.NewStaticKeys(map[string]ed25519.PublicKey{kid: pub}), cfg)
	if err != nil {
		b.Fatal(err)
	}
	dot := strings.LastIndexByte(tok, '.')
	input := []byte(tok[:dot])
	sig, err := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err != nil {
		b.Fatal(err)
	}
	key := edcache.New(pub)
	want := verifier.Expect{Product: "sku-1"}
	var tRing, tStatic, tKey, tRaw time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := prepared.Verify(ctx, tok, want); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := plain.Verify(ctx, tok, want); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if !key.Verify(input, [64]byte(sig)) {
			b.Fatal("invalid")
		}
		t3 := time.Now()
		if !ed25519.Verify(pub, input, sig) {
			b.Fatal("invalid")
		}
		t4 := time.Now()
		tRing += t1.Sub(t0)
		tStatic += t2.Sub(t1)
		tKey += t3.Sub(t2)
		tRaw += t4.Sub(t3)
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
