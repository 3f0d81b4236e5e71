package verifier

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// BenchmarkNonCryptoWork times everything Verify does around
// ed25519.Verify on a real admission token — segment scan, strict base64url,
// header and payload JSON scans, kid lookup, claim checks — by calling the
// same internal functions in the same order. Verify's cost is this plus
// BenchmarkEd25519Verify; on a loaded machine this is a steadier number
// than the difference of two noisy benchmarks.
func BenchmarkNonCryptoWork(b *testing.B) {
	seed := sha256.Sum256([]byte("bench"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)
	enc := base64.RawURLEncoding
	kidSum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + enc.EncodeToString(pub) + `"}`))
	kid := enc.EncodeToString(kidSum[:])
	in := enc.EncodeToString([]byte(`{"alg":"EdDSA","kid":"`+kid+`","typ":"flashgate-admission+jwt"}`)) + "." +
		enc.EncodeToString([]byte(`{"iss":"https://issuer.example","aud":"orders","sub":"user-12345","product":"sku-1",`+
			`"jti":"1234.56.1763680000000","iat":1763680000,"exp":1763680300}`))
	raw := in + "." + enc.EncodeToString(ed25519.Sign(priv, []byte(in)))
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
