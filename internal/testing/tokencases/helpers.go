package tokencases

import (
	"testing"

	"github.com/flashgate/flashgate/verifier"
)

// MustLoad is Load for tests: it fails tb if path cannot be loaded.
// Harnesses load the golden file with MustLoad(tb, GoldenPath(depth)).
func MustLoad(tb testing.TB, path string) *Set {
	tb.Helper()
	s, err := Load(path)
	if err != nil {
		tb.Fatalf("tokencases: %v (regenerate: go test ./internal/testing/tokencases -run TestGolden -update)", err)
	}
	return s
}

// Keys returns the published key set of s (its JWKS, parsed).
func (s *Set) Keys(tb testing.TB) *verifier.StaticKeys {
	tb.Helper()
	keys, err := verifier.ParseJWKS(s.JWKS)
	if err != nil {
		tb.Fatalf("tokencases: ParseJWKS: %v", err)
	}
	return keys
}

// Verifier returns a native verifier over the published keys of s with cfg
// (typically s.Config(c) for a case c).
func Verifier(tb testing.TB, s *Set, cfg verifier.Config) *verifier.Verifier {
	tb.Helper()
	v, err := verifier.New(s.Keys(tb), cfg)
	if err != nil {
		tb.Fatalf("tokencases: verifier.New: %v", err)
	}
	return v
}

// Base returns the first accepted case with a user and no leeway: the token
// the differential tests mutate.
func (s *Set) Base(tb testing.TB) Case {
	tb.Helper()
	for _, c := range s.Cases {
		if c.Want == verifier.CodeOK && c.Leeway == 0 && c.User != "" {
			return c
		}
	}
	tb.Fatal("tokencases: no valid case with a user in the table")
	return Case{}
}
