package server

import (
	"testing"

	"github.com/flashgate/flashgate/issuer"
)

// New refuses a nil Issuer and a nil pointer of an implementation, without
// the server naming the implementation (nilIssuer).
func TestNilIssuerRefused(t *testing.T) {
	for name, is := range map[string]Issuer{"nil": nil, "typed nil": (*issuer.Issuer)(nil)} {
		if !nilIssuer(is) {
			t.Errorf("%s: nilIssuer = false", name)
		}
		if _, err := New(Options{Issuer: is}); err == nil || err.Error() != "server: Options.Issuer is required" {
			t.Errorf("%s: New: %v, want Options.Issuer is required", name, err)
		}
	}
	if nilIssuer(&issuer.Issuer{}) {
		t.Error("a non-nil *issuer.Issuer reads as nil")
	}
}
