package verifier_test

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStdlibOnly: every non-test file of package verifier that TinyGo
// builds (no "//go:build !tinygo" constraint) imports only the standard
// library, so the package compiles to wasm for the edge.
func TestStdlibOnly(t *testing.T) {
	checked := checkImports(t, ".", true, func(string) bool { return false })
	if checked == 0 {
		t.Fatal("no core files checked")
	}
}

// TestRemoteStdlibOnly: every non-test file of package verifier/remote
// imports only the standard library and package verifier, so a verify-only
// order service that fetches the issuer's JWK Set pulls in neither jwx nor
// the key ring of package keys.
func TestRemoteStdlibOnly(t *testing.T) {
	const self = "github.com/flashgate/flashgate/verifier"
	checked := checkImports(t, "remote", false, func(path string) bool { return path == self })
	if checked == 0 {
		t.Fatal("no verifier/remote files checked")
	}
}

// TestRemoteDepsStdlibOrModule: the whole import graph of verifier/remote
// (go list -deps, tests excluded) is the standard library and this module,
// so no third-party module reaches it through package verifier either.
func TestRemoteDepsStdlibOrModule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./remote").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/flashgate/flashgate"
	n := 0
	for _, path := range strings.Fields(string(out)) {
		n++
		if path != module && !strings.HasPrefix(path, module+"/") {
			t.Errorf("verifier/remote depends on %q: only the standard library and %s", path, module)
		}
	}
	if n == 0 {
		t.Fatal("go list listed no module packages")
	}
}

// checkImports parses the non-test Go files of dir and reports each import
// that is not in the standard library (first path element without a dot)
// and not allowed. With skipNotTinyGo, files constrained to "!tinygo" are
// not checked. It returns the number of files checked.
func checkImports(t *testing.T, dir string, skipNotTinyGo bool, allowed func(path string) bool) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		excluded := false
		for _, cg := range f.Comments {
			if cg.Pos() >= f.Package {
				break
			}
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "//go:build ") && strings.Contains(c.Text, "!tinygo") {
					excluded = true
				}
			}
		}
		if excluded && skipNotTinyGo {
			continue
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && !allowed(path) {
				if skipNotTinyGo {
					t.Errorf("%s imports %q: core verifier files must use the standard library only (TinyGo)", name, path)
				} else {
					t.Errorf("%s imports %q: only the standard library and allowed module packages", name, path)
				}
			}
		}
	}
	return checked
}
