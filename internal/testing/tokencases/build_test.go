package tokencases

import (
	"reflect"
	"strings"
	"testing"
)

// TestBuildDeterministic: two builds are identical (the wasm harness relies
// on it) and every case is well formed.
func TestBuildDeterministic(t *testing.T) {
	a, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("Build is not deterministic")
	}
	if !strings.Contains(string(a.JWKS), a.CurrentKID) || !strings.Contains(string(a.JWKS), a.PreviousKID) ||
		strings.Contains(string(a.JWKS), a.RogueKID) || strings.Contains(string(a.JWKS), `"d"`) {
		t.Fatalf("unexpected JWKS %s", a.JWKS)
	}
	for _, c := range a.Cases {
		if c.Name == "" || c.Source == "" || c.Now == 0 {
			t.Errorf("incomplete case %+v", c)
		}
		if (c.Want == 0) != (c.WantClaims != nil) {
			t.Errorf("%s: WantClaims must be set exactly for valid cases", c.Name)
		}
	}
	t.Logf("%d cases", len(a.Cases))
}
