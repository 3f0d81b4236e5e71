package verifier_test

// Attack-catalogue tests that do not fit the shared case table
// (internal/testing/tokencases, run natively by TestTokenCases and through the wasm
// build by wasm.TestWasmTokenCases): allocation bounds for oversized input,
// the Wycheproof JWS file run as-is, and RFC 8037 known answers end to end.
// docs/token-attacks.md maps every item of the catalogue to its tests.

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/verifier"
)

// oversized are inputs far beyond MaxTokenSize: refused as too_large before
// any decoding, with an allocation count and size that do not grow with them.
func oversized(set *tokencases.Set) map[string]string {
	return map[string]string{
		"4097_bytes":       strings.Repeat("A", verifier.MaxTokenSize+1),
		"1mib_garbage":     strings.Repeat("A", 1<<20),
		"1mib_dot_flood":   strings.Repeat(".", 1<<20),
		"1mib_valid_first": set.Valid + strings.Repeat("A", 1<<20),
		"1mib_bad_byte":    "\x00" + strings.Repeat(".", 1<<20),
	}
}

// TestTooLargeAllocatesConstant (item 14): a 1 MiB token and a 1 MiB dot
// flood are refused as too_large with at most maxAllocs allocations of at
// most maxBytes bytes in total per call, the same as a 4097-byte token —
// nothing proportional to the input.
func TestTooLargeAllocatesConstant(t *testing.T) {
	const maxAllocs, maxBytes = 6, 512 // today: 4 allocations, 137 B (the wrapped error)
	set := buildSet(t)
	c := set.Cases[0]
	v := tokencases.Verifier(t, set, set.Config(c))
	ctx, want := context.Background(), c.Expect()

	names := make([]string, 0, 8)
	inputs := oversized(set)
	for name := range inputs {
		names = append(names, name)
	}
	sort.Strings(names)
	var ref float64 = -1
	for _, name := range names {
		raw := inputs[name]
		_, err := v.Verify(ctx, raw, want)
		require.Equalf(t, verifier.CodeTooLarge, verifier.CodeOf(err), "%s: %v", name, err)

		allocs := testing.AllocsPerRun(100, func() { _, _ = v.Verify(ctx, raw, want) })
		const runs = 200
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < runs; i++ {
			_, _ = v.Verify(ctx, raw, want)
		}
		runtime.ReadMemStats(&after)
		bytes := float64(after.TotalAlloc-before.TotalAlloc) / runs
		t.Logf("%-17s %8d bytes in: %.0f allocs, %.0f B per refusal", name, len(raw), allocs, bytes)
		if allocs > maxAllocs {
			t.Errorf("%s: %.0f allocations per refusal, want ≤ %d", name, allocs, maxAllocs)
		}
		if bytes > maxBytes {
			t.Errorf("%s: %.0f bytes allocated per refusal, want ≤ %d", name, bytes, maxBytes)
		}
		// One allocation either way is noise, not input dependence: under
		// -race, sync.Pool (fmt's printers, behind the error message) drops
		// items at random, so a refusal sometimes allocates one more (seen
		// in 1 of 5 -race runs). Dependence on the input shows in bytes.
		if ref >= 0 && math.Abs(allocs-ref) > 1 {
			t.Errorf("%s: %.0f allocations, other oversized inputs %.0f: cost depends on the input", name, allocs, ref)
		}
		ref = allocs
	}
}

// BenchmarkVerifyRejectTooLarge (item 14): ns/op and B/op stay flat from
// 4097 bytes to 1 MiB (run with -benchmem).
func BenchmarkVerifyRejectTooLarge(b *testing.B) {
	set := buildSet(b)
	c := set.Cases[0]
	v := tokencases.Verifier(b, set, set.Config(c))
	inputs := oversized(set)
	for _, name := range []string{"4097_bytes", "1mib_garbage", "1mib_dot_flood"} {
		raw := inputs[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(context.Background(), raw, c.Expect()); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}

// vectorsDir holds the public test vectors the known-answer tests read,
// copied into the repository (testdata/wycheproof/README.md) so that they
// run in any clone.
var vectorsDir = "testdata"

var compactShape = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)

// TestWycheproofJWS runs every case of C2SP/wycheproof
// testvectors_v1/json_web_signature_test.json through Verify with our key
// set. None is EdDSA under one of our keys, so none may be accepted —
// including the file's "valid" ones (HS/RS/PS/ES signatures under the
// file's own keys), and the four documented quirks (tcId 367, 370, 372,
// 373; see the vector collection's notes). Every case in compact form whose
// header is a JSON object (ES256 ones with r or s = 0, ≥ n, too long,
// psychic signatures, …) must be refused as unsupported_alg: the alg is
// fixed by our key type, so nothing past the header is even looked at.
func TestWycheproofJWS(t *testing.T) {
	path := filepath.Join(vectorsDir, "wycheproof", "json_web_signature_test.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("Wycheproof vectors missing at %s: %v", path, err)
	}
	var file struct {
		NumberOfTests int `json:"numberOfTests"`
		TestGroups    []struct {
			Comment string `json:"comment"`
			Tests   []struct {
				TcID    int             `json:"tcId"`
				Comment string          `json:"comment"`
				JWS     json.RawMessage `json:"jws"`
				Result  string          `json:"result"`
			} `json:"tests"`
		} `json:"testGroups"`
	}
	require.NoError(t, json.Unmarshal(data, &file))

	set := buildSet(t)
	// The file's payloads are not our claims; the clock does not matter
	// because nothing gets that far.
	v := tokencases.Verifier(t, set, verifier.Config{Issuer: tokencases.Issuer, Audience: tokencases.Audience,
		Product: tokencases.Product, Now: func() time.Time { return time.Unix(tokencases.Now, 0) }})

	n := 0
	codes := map[verifier.Code]int{}
	algs := map[string]int{}
	for _, g := range file.TestGroups {
		for _, tc := range g.Tests {
			n++
			var raw string
			if err := json.Unmarshal(tc.JWS, &raw); err != nil {
				raw = string(tc.JWS) // a JSON serialization object, passed as the token text
			}
			_, err := v.Verify(context.Background(), raw, verifier.Expect{})
			got := verifier.CodeOf(err)
			codes[got]++
			if err == nil {
				t.Errorf("tc %d (%s/%s, %s): accepted", tc.TcID, g.Comment, tc.Comment, tc.Result)
				continue
			}
			alg, ok := headerAlg(raw)
			if !ok {
				continue
			}
			algs[alg]++
			if alg == verifier.Alg {
				t.Errorf("tc %d: unexpected EdDSA vector; refused with %v", tc.TcID, err)
				continue
			}
			if got != verifier.CodeUnsupportedAlg {
				t.Errorf("tc %d (%s/%s): alg %q refused as %v, want unsupported_alg: %v", tc.TcID, g.Comment, tc.Comment, alg, got, err)
			}
		}
	}
	require.Equal(t, file.NumberOfTests, n, "ran every test of the file")
	t.Logf("%d Wycheproof JWS vectors, all refused; codes %v; compact vectors by alg %v", n, codes, algs)
}

// headerAlg returns the alg of a compact token whose header is canonical
// base64url of a JSON object with a string alg.
func headerAlg(raw string) (string, bool) {
	if !compactShape.MatchString(raw) {
		return "", false
	}
	h, err := base64.RawURLEncoding.Strict().DecodeString(raw[:strings.IndexByte(raw, '.')])
	if err != nil {
		return "", false
	}
	var hdr struct {
		Alg *string `json:"alg"`
	}
	if json.Unmarshal(h, &hdr) != nil || hdr.Alg == nil {
		return "", false
	}
	return *hdr.Alg, true
}

// RFC 8037 Appendix A.
const (
	rfc8037D   = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
	rfc8037A2X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	rfc8037A3  = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
	rfc8037A4  = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
)

// TestRFC8037KnownAnswers: the RFC 8037 key through the public API —
// A.1 → A.2 public key, A.3 thumbprint (our kid), A.4 signature reproduced
// byte for byte (Ed25519 is deterministic), A.5 verification through a
// parsed JWKS, and the A.4 token itself refused by Verify for lacking our
// typ (it is a bare JWS, not an admission token). The signature layer alone
// is TestRFC8037A4 (internal_test.go).
func TestRFC8037KnownAnswers(t *testing.T) {
	seed, err := base64.RawURLEncoding.DecodeString(rfc8037D)
	require.NoError(t, err)
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	require.Equal(t, rfc8037A2X, base64.RawURLEncoding.EncodeToString(pub), "A.1 d → A.2 x")
	require.Equal(t, rfc8037A3, tokencases.Thumbprint(pub), "A.3 RFC 7638 thumbprint")

	segs := strings.Split(rfc8037A4, ".")
	require.Equal(t, rfc8037A4, tokencases.SignSegments(priv, segs[0], segs[1]), "A.4 reproduced")

	keys, err := verifier.ParseJWKS([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037A2X + `","kid":"` + rfc8037A3 + `"}]}`))
	require.NoError(t, err)
	now := int64(1763680000)
	v, err := verifier.New(keys, verifier.Config{Issuer: tokencases.Issuer, Audience: tokencases.Audience,
		Now: func() time.Time { return time.Unix(now, 0) }})
	require.NoError(t, err)
	want := verifier.Expect{Product: tokencases.Product}

	// A.4 as a token: refused (no typ; and its payload is not a claims set).
	_, err = v.Verify(context.Background(), rfc8037A4, want)
	require.ErrorIs(t, err, verifier.ErrBadType)

	// A.5 end to end: an admission token signed with the A.1 key verifies
	// with the A.2 key found by its A.3 kid.
	tok := signClaims(priv, rfc8037A3, now-10, now+290)
	got, err := v.Verify(context.Background(), tok, want)
	require.NoError(t, err)
	require.Equal(t, rfc8037A3, got.KeyID)
	// ... and a one-bit change anywhere is a signature failure.
	for _, i := range []int{0, len(tok) / 2, len(tok) - 2} {
		b := []byte(tok)
		if b[i] == '.' {
			continue
		}
		b[i] ^= 1
		if _, err := v.Verify(context.Background(), string(b), want); err == nil {
			t.Errorf("bit flip at %d accepted", i)
		}
	}
}
