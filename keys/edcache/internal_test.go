package edcache

import (
	"context"
	"crypto/ed25519"
	"strconv"
	"testing"

	"github.com/flashgate/flashgate/verifier"
)

// TestSetCacheBounded: a Set caches at most maxCached keys (a set whose
// kids keep changing cannot grow it without bound), reuses a cached key
// while the wrapped set's bytes are unchanged, and every answer stays
// right after the cache is emptied.
func TestSetCacheBounded(t *testing.T) {
	m := map[string]ed25519.PublicKey{}
	for i := 0; i < 3*maxCached; i++ {
		var seed [32]byte
		seed[0], seed[1] = byte(i), byte(i>>8)
		m["k"+strconv.Itoa(i)] = ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
	}
	s := Wrap(verifier.NewStaticKeys(m)).(*Set)
	ctx := context.Background()
	first, err := s.PreparedKey(ctx, "k0")
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.PreparedKey(ctx, "k0")
	if err != nil {
		t.Fatal(err)
	}
	if first != again {
		t.Fatal("unchanged key decoded twice")
	}
	for i := 0; i < 3*maxCached; i++ {
		kid := "k" + strconv.Itoa(i)
		pk, err := s.PreparedKey(ctx, kid)
		if err != nil {
			t.Fatal(err)
		}
		if string(pk.PublicKey()) != string(m[kid]) {
			t.Fatalf("%s: wrong key", kid)
		}
		s.mu.RLock()
		n := len(s.m)
		s.mu.RUnlock()
		if n > maxCached {
			t.Fatalf("%d keys cached, limit %d", n, maxCached)
		}
	}
	if _, err := s.PreparedKey(ctx, "absent"); err == nil {
		t.Fatal("unknown kid prepared")
	}
	if _, ok := s.m["absent"]; ok {
		t.Fatal("unknown kid cached")
	}
}
