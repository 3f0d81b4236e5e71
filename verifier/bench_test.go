package verifier_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/verifier"
)

// benchFixture is a real admission token as the issuer mints it: kid is the
// 43-character RFC 7638 thumbprint, exp = iat + 300.
type benchFixture struct {
	token string
	pub   ed25519.PublicKey
	v     *verifier.Verifier
	want  verifier.Expect
	input []byte // signing input
	sig   []byte
	now   time.Time
}

func newBenchFixture(tb testing.TB) *benchFixture {
	priv := tokencases.Key("bench")
	pub := priv.Public().(ed25519.PublicKey)
	kid := tokencases.Thumbprint(pub)
	if len(kid) != 43 {
		tb.Fatalf("kid length %d", len(kid))
	}
	iat := int64(1763680000)
	token := (&testkit.Signer{Kid: kid, Key: priv}).Sign(tokencases.StandardClaims()) // iat 1763680000, exp iat+300
	now := time.Unix(iat+60, 0)
	v, err := verifier.New(verifier.NewStaticKeys(map[string]ed25519.PublicKey{kid: pub}), verifier.Config{
		Issuer: "https://issuer.example", Audience: "orders",
		Now: func() time.Time { return now },
	})
	if err != nil {
		tb.Fatal(err)
	}
	dot := strings.LastIndexByte(token, '.')
	sig, err := base64.RawURLEncoding.DecodeString(token[dot+1:])
	if err != nil {
		tb.Fatal(err)
	}
	fx := &benchFixture{token: token, pub: pub, v: v, want: verifier.Expect{Product: "sku-1", User: ""},
		input: []byte(token[:dot]), sig: sig, now: now}
	if _, err := v.Verify(context.Background(), token, fx.want); err != nil {
		tb.Fatal(err)
	}
	return fx
}

func BenchmarkVerify(b *testing.B) {
	fx := newBenchFixture(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(fx.token)))
	for b.Loop() {
		if _, err := fx.v.Verify(ctx, fx.token, fx.want); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEd25519Verify is the physical limit: the signature check alone
// on the same signing input and signature.
func BenchmarkEd25519Verify(b *testing.B) {
	fx := newBenchFixture(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(fx.token)))
	for b.Loop() {
		if !ed25519.Verify(fx.pub, fx.input, fx.sig) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkJWXParse is the general-purpose library for comparison.
func BenchmarkJWXParse(b *testing.B) {
	fx := newBenchFixture(b)
	clock := jwt.ClockFunc(func() time.Time { return fx.now })
	raw := []byte(fx.token)
	b.ReportAllocs()
	b.SetBytes(int64(len(fx.token)))
	for b.Loop() {
		if _, err := jwt.Parse(raw, jwt.WithKey(jwa.EdDSA, fx.pub), jwt.WithValidate(true),
			jwt.WithIssuer("https://issuer.example"), jwt.WithAudience("orders"),
			jwt.WithClaimValue("product", "sku-1"), jwt.WithRequiredClaim("exp"),
			jwt.WithRequiredClaim("iat"), jwt.WithClock(clock)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyVsEd25519 interleaves Verify and raw ed25519.Verify in
// the same loop, so both see the same machine load, and reports their
// ratio (the goal: ≤ 1.15).
func BenchmarkVerifyVsEd25519(b *testing.B) {
	fx := newBenchFixture(b)
	ctx := context.Background()
	var ours, raw time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := fx.v.Verify(ctx, fx.token, fx.want); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if !ed25519.Verify(fx.pub, fx.input, fx.sig) {
			b.Fatal("invalid")
		}
		t2 := time.Now()
		ours += t1.Sub(t0)
		raw += t2.Sub(t1)
	}
	b.ReportMetric(float64(ours)/float64(raw), "verify/ed25519")
	b.ReportMetric(float64(ours-raw)/float64(b.N), "overhead-ns/op")
}

// BenchmarkVerifyRejectMalformed: refusing garbage costs no crypto.
func BenchmarkVerifyRejectMalformed(b *testing.B) {
	fx := newBenchFixture(b)
	ctx := context.Background()
	bad := fx.token[:len(fx.token)-1] + "!"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fx.v.Verify(ctx, bad, fx.want); err == nil {
			b.Fatal("accepted")
		}
	}
}

// TestVerifyAllocs: a successful Verify allocates at most 10 times (today:
// the Token and its kid, sub and jti strings).
func TestVerifyAllocs(t *testing.T) {
	fx := newBenchFixture(t)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := fx.v.Verify(ctx, fx.token, fx.want); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.0f allocations per successful Verify", allocs)
	if allocs > 10 {
		t.Fatalf("%.0f allocations per Verify, want ≤ 10", allocs)
	}
}
