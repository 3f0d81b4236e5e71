package flashgate_test

import (
	"os/exec"
	"strings"
	"testing"
)

// deps returns the packages pkg depends on (go list -deps, tests excluded).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

const module = "github.com/flashgate/flashgate"

// TestImportDirection holds the package graph README "Architecture" draws:
// which package may depend on what. go list answers for the non-test files.
func TestImportDirection(t *testing.T) {
	for _, tc := range []struct {
		pkg string
		// onlyModule: every dependency is a package of this module (no third-party module).
		onlyModule bool
		// forbidden: substrings no dependency may contain.
		forbidden []string
	}{
		{pkg: module, onlyModule: true, forbidden: []string{module + "/"}}, // the leaf
		{pkg: module + "/problem", onlyModule: true, forbidden: []string{module + "/issuer", module + "/verifier", module + "/server"}},
		// The verify-only order pod: the verifier and its remote key set.
		{pkg: module + "/verifier/...", onlyModule: true, forbidden: []string{module + "/issuer", module + "/keys", module + "/server", module + "/order"}},
		{pkg: module + "/issuer", forbidden: []string{module + "/verifier", module + "/server", module + "/keys", module + "/order",
			module + "/problem", "fiber", "fasthttp", "jwx", "prometheus", "wazero", "miniredis"}},
		{pkg: module + "/order", forbidden: []string{module + "/server", module + "/keys", "fiber", "fasthttp", "jwx",
			"miniredis", "prometheus", "wazero"}},
		{pkg: module + "/keys", forbidden: []string{module + "/issuer", module + "/server", module + "/order"}},
		{pkg: module + "/journal", forbidden: []string{module + "/issuer", module + "/server", module + "/keys", module + "/order",
			module + "/verifier", "go-redis", "fiber", "fasthttp", "jwx", "prometheus", "wazero", "miniredis", "sqlite"}},
		{pkg: module + "/server", forbidden: []string{module + "/order", module + "/cmd", "wazero", "miniredis"}},
	} {
		for _, d := range deps(t, tc.pkg) {
			if tc.onlyModule && !strings.HasPrefix(d, module) {
				t.Errorf("%s depends on %s: standard library and this module only", tc.pkg, d)
			}
			for _, f := range tc.forbidden {
				if strings.Contains(d, f) {
					t.Errorf("%s depends on %s (%q is not allowed)", tc.pkg, d, f)
				}
			}
		}
	}
}
