package main

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/verifier"
)

// differ runs tok through the native verifier and the module, both paths (same keys,
// configuration, clock and expectations) and reports a disagreement in code
// or claims.
type differ struct {
	tb   testing.TB
	set  *tokencases.Set
	v    *verifier.Verifier
	h    *host
	base tokencases.Case
}

func newDiffer(tb testing.TB) *differ {
	set := tokencases.MustLoad(tb, tokencases.GoldenPath(1))
	base := set.Base(tb)
	v := tokencases.Verifier(tb, set, set.Config(base))
	h := newHost(tb)
	h.mustSetKeys(string(set.JWKS))
	h.mustConfigure("iss=" + set.Issuer + "\naud=" + set.Audience + "\nleeway=0")
	return &differ{tb: tb, set: set, v: v, h: h, base: base}
}

func (d *differ) check(tok string) verifier.Code {
	d.tb.Helper()
	t, err := d.v.Verify(context.Background(), tok, d.base.Expect())
	native := verifier.CodeOf(err)
	for _, p := range paths {
		st, res := p.check(d.h, tok, d.base.Product, d.base.User, d.base.Now)
		if got := verifier.Code(st); got != native {
			d.tb.Fatalf("token %q: wasm %s %v (%s), native %v (%v)", tok, p.name, got, res, native, err)
		}
		if native == verifier.CodeOK {
			if wc, nc := decodeClaims(d.tb, res), tokencases.ClaimsOf(t); wc != nc {
				d.tb.Fatalf("token %q: wasm %s claims %+v, native %+v", tok, p.name, wc, nc)
			}
		}
	}
	return native
}

// TestWasmMutationsDifferential: deterministic random mutations of a valid
// token get the same answer (code and claims) from the native verifier and
// the module.
func TestWasmMutationsDifferential(t *testing.T) {
	d := newDiffer(t)
	if got := d.check(d.base.Token); got != verifier.CodeOK {
		t.Fatalf("the base token is refused: %v", got)
	}
	r := rand.New(rand.NewPCG(2026, 11))
	codes := map[verifier.Code]int{}
	const n = 2000
	for range n {
		codes[d.check(tokencases.Mutate(r, d.base.Token))]++
	}
	t.Logf("%d mutations agree: %v", n, codes)
	if len(codes) < 4 {
		t.Errorf("mutations reached only %d result codes: %v", len(codes), codes)
	}
}

// FuzzWasmDifferential: any input gets the same answer from both.
func FuzzWasmDifferential(f *testing.F) {
	d := newDiffer(f)
	f.Add(d.base.Token)
	for _, c := range d.set.Cases[:40] {
		f.Add(c.Token)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		d.tb, d.h.tb = t, t
		d.check(tok)
	})
}
