package edcache_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/keys/edcache"
	"github.com/flashgate/flashgate/verifier"
)

// sameVerify runs tok through a verifier over plain (crypto/ed25519) and
// one over prepared (edcache) and fails unless both give the same error
// text (so the same code) and the same claims. It returns the error.
func sameVerify(t *testing.T, plain, prepared *verifier.Verifier, tok string, want verifier.Expect) error {
	t.Helper()
	got1, err1 := plain.Verify(context.Background(), tok, want)
	got2, err2 := prepared.Verify(context.Background(), tok, want)
	if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
		t.Fatalf("token %q: crypto/ed25519 verifier says %v, prepared %v", tok, err1, err2)
	}
	if err1 == nil && *got1 != *got2 {
		t.Fatalf("token %q: claims %+v vs %+v", tok, got1, got2)
	}
	return err1
}

// TestTokenCases: every case of the shared token table (tokencases) and
// 30 random mutations of each accepted one give the same answer — code,
// message and claims — through edcache.Wrap as through the plain
// StaticKeys, and the table's expected code.
func TestTokenCases(t *testing.T) {
	set := tokencases.MustLoad(t, tokencases.GoldenPath(2))
	r := rand.New(rand.NewPCG(13, 13))
	ok, mutants := 0, 0
	for _, c := range set.Cases {
		plain := tokencases.Verifier(t, set, set.Config(c))
		prepared, err := verifier.New(edcache.Wrap(set.Keys(t)), set.Config(c))
		if err != nil {
			t.Fatal(err)
		}
		err = sameVerify(t, plain, prepared, c.Token, c.Expect())
		if got := verifier.CodeOf(err); got != c.Want {
			t.Fatalf("case %s: %v, want %v", c.Name, got, c.Want)
		}
		if c.Want != verifier.CodeOK {
			continue
		}
		ok++
		for i := 0; i < 30; i++ {
			if sameVerify(t, plain, prepared, tokencases.Mutate(r, c.Token), c.Expect()) != nil {
				mutants++
			}
		}
	}
	if ok == 0 || mutants == 0 {
		t.Fatalf("%d accepted cases, %d rejected mutants: nothing compared", ok, mutants)
	}
}

// mutableKeys is a KeySet whose keys change (a rotation of a remote JWKS).
type mutableKeys struct {
	mu sync.Mutex
	m  map[string]ed25519.PublicKey
	n  int // PublicKey calls
}

func (k *mutableKeys) set(kid string, pub ed25519.PublicKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[kid] = pub
}

func (k *mutableKeys) PublicKey(_ context.Context, kid string) (ed25519.PublicKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n++
	pub, ok := k.m[kid]
	if !ok {
		return nil, verifier.ErrUnknownKey
	}
	return pub, nil
}

func signedBy(label, kid string) string {
	iat := time.Unix(tokencases.IssuedAt, 0)
	return (&testkit.Signer{Kid: kid, Key: tokencases.Key(label)}).Sign(flashgate.NewClaims(tokencases.Issuer,
		tokencases.Audience, tokencases.User, tokencases.Product, "j1", iat, iat.Add(5*time.Minute)))
}

func newVerifier(t *testing.T, ks verifier.KeySet) *verifier.Verifier {
	t.Helper()
	now := time.Unix(tokencases.IssuedAt+10, 0)
	v, err := verifier.New(ks, verifier.Config{Issuer: tokencases.Issuer, Audience: tokencases.Audience,
		Product: tokencases.Product, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWrapRotation: when the wrapped set's key for a kid changes, the next
// verification uses the new key — a token of the replaced key is refused,
// one of the new key accepted — and the wrapped set is asked every time.
func TestWrapRotation(t *testing.T) {
	ks := &mutableKeys{m: map[string]ed25519.PublicKey{}}
	ks.set("k", tokencases.Key("one").Public().(ed25519.PublicKey))
	v := newVerifier(t, edcache.Wrap(ks))
	ctx := context.Background()
	one, two := signedBy("one", "k"), signedBy("two", "k")
	if _, err := v.Verify(ctx, one, verifier.Expect{}); err != nil {
		t.Fatalf("key one: %v", err)
	}
	if _, err := v.Verify(ctx, two, verifier.Expect{}); !errors.Is(err, verifier.ErrBadSignature) {
		t.Fatalf("key two before rotation: %v, want ErrBadSignature", err)
	}
	ks.set("k", tokencases.Key("two").Public().(ed25519.PublicKey))
	if _, err := v.Verify(ctx, one, verifier.Expect{}); !errors.Is(err, verifier.ErrBadSignature) {
		t.Fatalf("key one after rotation: %v, want ErrBadSignature", err)
	}
	if _, err := v.Verify(ctx, two, verifier.Expect{}); err != nil {
		t.Fatalf("key two after rotation: %v", err)
	}
	if _, err := v.Verify(ctx, signedBy("two", "gone"), verifier.Expect{}); !errors.Is(err, verifier.ErrUnknownKey) {
		t.Fatalf("unknown kid: %v, want ErrUnknownKey", err)
	}
	if ks.n != 5 {
		t.Fatalf("wrapped set asked %d times for 5 verifications", ks.n)
	}
}

// failing is a KeySet that answers every kid with err.
type failing struct{ err error }

func (f failing) PublicKey(context.Context, string) (ed25519.PublicKey, error) { return nil, f.err }

// shortKey is a KeySet that returns a 31-byte key.
type shortKey struct{}

func (shortKey) PublicKey(context.Context, string) (ed25519.PublicKey, error) {
	return make(ed25519.PublicKey, 31), nil
}

// TestWrapErrors: the wrapped set's errors and a wrong-size key give the
// same error through Wrap as without it.
func TestWrapErrors(t *testing.T) {
	tok := signedBy("one", "k")
	for _, ks := range []verifier.KeySet{
		failing{verifier.ErrUnknownKey}, failing{verifier.ErrUnavailable},
		failing{errors.New("dial tcp: refused")}, shortKey{},
	} {
		err := sameVerify(t, newVerifier(t, ks), newVerifier(t, edcache.Wrap(ks)), tok, verifier.Expect{})
		if err == nil {
			t.Fatalf("%T accepted", ks)
		}
	}
}

// TestWrapKeepsPreparedSets: a set that is already prepared (the key ring)
// is returned as is, not wrapped twice.
func TestWrapKeepsPreparedSets(t *testing.T) {
	ring, err := keys.Generate(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := edcache.Wrap(ring); got != verifier.PreparedKeySet(ring) {
		t.Fatalf("Wrap(ring) = %T, want the ring", got)
	}
	if _, ok := edcache.Wrap(failing{}).(*edcache.Set); !ok {
		t.Fatal("Wrap of a plain KeySet is not a *Set")
	}
}

// TestVerifyAllocs: Verify over a prepared key ring allocates no more than
// Verify over StaticKeys (crypto/ed25519) for the same token.
func TestVerifyAllocs(t *testing.T) {
	now := time.Unix(tokencases.IssuedAt+10, 0)
	ring, err := keys.Generate(now)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ring.Sign(flashgate.NewClaims(tokencases.Issuer, tokencases.Audience, tokencases.User,
		tokencases.Product, "j1", now, now.Add(time.Minute)).JSON())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pub, err := ring.PublicKey(ctx, ring.ActiveKeyID())
	if err != nil {
		t.Fatal(err)
	}
	count := func(ks verifier.KeySet) float64 {
		v := newVerifier(t, ks)
		return testing.AllocsPerRun(100, func() {
			if _, err := v.Verify(ctx, tok, verifier.Expect{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	prepared := count(ring)
	plain := count(verifier.NewStaticKeys(map[string]ed25519.PublicKey{ring.ActiveKeyID(): pub}))
	t.Logf("allocations per Verify: prepared %.0f, crypto/ed25519 %.0f", prepared, plain)
	if prepared > plain {
		t.Fatalf("prepared Verify allocates %.0f times, crypto/ed25519's %.0f", prepared, plain)
	}
}
