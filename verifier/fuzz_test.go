package verifier_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/verifier"
)

// FuzzVerify: Verify never panics, and whatever it accepts carries a real
// Ed25519 signature by a published key over its raw signing input.
func FuzzVerify(f *testing.F) {
	set := buildSet(f)
	c := set.Cases[0]
	v := tokencases.Verifier(f, set, set.Config(c))
	for _, tc := range set.Cases {
		if len(tc.Token) <= 2*verifier.MaxTokenSize {
			f.Add(tc.Token)
		}
	}
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("a.b.c")
	pubs := []ed25519.PublicKey{set.Current.Public().(ed25519.PublicKey), set.Previous.Public().(ed25519.PublicKey)}
	f.Fuzz(func(t *testing.T, raw string) {
		tok, err := v.Verify(context.Background(), raw, c.Expect())
		if err != nil {
			if tok != nil {
				t.Fatal("token returned with an error")
			}
			if verifier.CodeOf(err) == verifier.CodeOK {
				t.Fatalf("error %v has CodeOK", err)
			}
			return
		}
		dot := strings.LastIndexByte(raw, '.')
		sig, err := base64.RawURLEncoding.Strict().DecodeString(raw[dot+1:])
		if err != nil {
			t.Fatalf("accepted a token whose signature does not decode: %q", raw)
		}
		for _, pub := range pubs {
			if ed25519.Verify(pub, []byte(raw[:dot]), sig) {
				return
			}
		}
		t.Fatalf("accepted a token not signed by a published key: %q", raw)
	})
}

// FuzzParseJWKS: ParseJWKS never panics and returns only usable keys.
func FuzzParseJWKS(f *testing.F) {
	set := buildSet(f)
	f.Add(set.JWKS)
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"a"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","d":"x","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"a"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"a","y":"b"}],"keys":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ks, err := verifier.ParseJWKS(data)
		if err != nil {
			return
		}
		ids := ks.KeyIDs()
		if len(ids) == 0 {
			t.Fatal("no keys but no error")
		}
		for _, id := range ids {
			pub, err := ks.PublicKey(context.Background(), id)
			if err != nil || len(pub) != ed25519.PublicKeySize || id == "" {
				t.Fatalf("bad key %q: %v", id, err)
			}
		}
	})
}
