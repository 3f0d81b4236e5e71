package verifier

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/testkit"
)

// BenchmarkNonCryptoWork times everything Verify does around
// ed25519.Verify on a real admission token — segment scan, strict base64url,
// header and payload JSON scans, kid lookup, claim checks — by calling the
// same internal functions in the same order. Verify's cost is this plus
// BenchmarkEd25519Verify; on a loaded machine this is a steadier number
// than the difference of two noisy benchmarks.
func BenchmarkNonCryptoWork(b *testing.B) {
	signer := testkit.SignerFor("bench")
	pub, kid := signer.Public(), signer.Kid
	iat := time.Unix(1763680000, 0)
	raw := signer.Sign(flashgate.NewClaims("https://issuer.example", "orders", "user-12345", "sku-1",
		"1234.56.1763680000000", iat, iat.Add(300*time.Second)))
	now := time.Unix(1763680060, 0)
	v, err := New(NewStaticKeys(map[string]ed25519.PublicKey{kid: pub}), Config{
		Issuer: "https://issuer.example", Audience: "orders", Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	want := Expect{Product: "sku-1"}
	if _, err := v.Verify(context.Background(), raw, want); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for i := 0; i < len(raw); i++ {
			if b64Table[raw[i]] == b64Invalid {
				b.Fatal("alphabet")
			}
		}
		d1 := strings.IndexByte(raw, '.')
		d2 := strings.LastIndexByte(raw, '.')
		var buf [maxDecoded]byte
		n, _ := decodeSegment(buf[:], raw[:d1])
		hdr := buf[:n]
		var hmem [maxMembers]member
		members, err := parseTopObject(hdr, hmem[:0])
		if err != nil {
			b.Fatal(err)
		}
		var alg, typ, kidM *member
		var scratch [32]byte
		for k := range members {
			switch string(nameOf(hdr, &members[k], &scratch)) {
			case "alg":
				alg = &members[k]
			case "typ":
				typ = &members[k]
			case "kid":
				kidM = &members[k]
			}
		}
		if !stringIs(hdr, alg, Alg) || !stringIs(hdr, typ, TokenType) || stringLen(hdr, kidM) > maxKIDLen {
			b.Fatal("header")
		}
		keyID := stringValue(hdr, kidM)
		if _, err := v.keys.PublicKey(ctx, keyID); err != nil {
			b.Fatal(err)
		}
		var sig [64]byte
		if _, ok := decodeSegment(sig[:], raw[d2+1:]); !ok {
			b.Fatal("sig")
		}
		n, _ = decodeSegment(buf[:], raw[d1+1:d2])
		pl := buf[:n]
		var pmem [maxMembers]member
		members, err = parseTopObject(pl, pmem[:0])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := v.claimsFrom(pl, members, keyID, want, &scratch); err != nil {
			b.Fatal(err)
		}
	}
}
