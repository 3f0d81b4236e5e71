package flashgate_test

import (
	"go/version"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestImportDirection holds the package graph docs/architecture.md "Architecture" draws:
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
		// The journal process's consumer: Redis streams in, the journal's store out.
		{pkg: module + "/journal/consumer", forbidden: []string{module + "/issuer", module + "/server", module + "/keys",
			module + "/order", module + "/verifier", "fiber", "fasthttp", "jwx", "wazero", "miniredis", "sqlite"}},
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

// goDirective is the go line of go.mod, and why it is that low and no lower.
// Every importer of a package of this module (verifier included) must have
// a go line at least this high, and a toolchain at least this new: a patch
// level (go 1.26.8) would make every Go 1.26.0 … 1.26.7 user download a
// toolchain for nothing. The module's own code needs less (package verifier
// and what it imports: go 1.21, the min/max builtins, checked by
// TestVerifierBuildsAtGo121), but the go line may not be lower than any
// requirement's: go mod tidy raises it to the highest, today go 1.26.0
// (caarlos0/env v11, prometheus client_golang and common, go-redis v9,
// x/sys, x/text). Raising this pin needs a feature or a requirement that
// needs it; TestGoDirective names the requirement.
const goDirective = "1.26.0"

// TestGoDirective pins go.mod's go line to goDirective, which must be the
// highest go line among the module's requirements (go list -m all): higher
// forces a newer toolchain on importers for no feature; lower go mod tidy
// undoes. go.mod has no toolchain line, which would force one too.
func TestGoDirective(t *testing.T) {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "go" {
			got = f[1]
		}
		if len(f) > 0 && f[0] == "toolchain" {
			t.Errorf("go.mod has %q: it forces that toolchain on everyone who builds the module; drop it", line)
		}
	}
	if got != goDirective {
		t.Errorf("go.mod says go %s, the pin is go %s: lower it again, or raise the pin with the feature or requirement that needs it", got, goDirective)
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.GoVersion}}", "all").Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	highest, by := "", ""
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] == module {
			continue
		}
		if highest == "" || version.Compare("go"+f[1], "go"+highest) > 0 {
			highest, by = f[1], f[0]
		}
	}
	if highest != goDirective {
		t.Errorf("the highest go line among the requirements is %s (%s), the pin is %s: set go.mod's go line and the pin to it", highest, by, goDirective)
	}
}

// TestVerifierBuildsAtGo121: package verifier, verifier/remote and what they
// import of this module (problem) build and vet (the stdversion analyzer
// names standard-library API newer than the go line) in a copy whose go.mod
// says go 1.21, so the verify-only packages stay ready for a module of their
// own that Go 1.21 users can import.
func TestVerifierBuildsAtGo121(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f",
		"{{if not .Standard}}{{.ImportPath}} {{join .GoFiles \" \"}}{{end}}", "./verifier/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dir := t.TempDir()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if f[0] != module && !strings.HasPrefix(f[0], module+"/") {
			t.Fatalf("verifier depends on %s, outside the module", f[0])
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		if err := os.MkdirAll(filepath.Join(dir, rel), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range f[1:] {
			src, err := os.ReadFile(filepath.Join(rel, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, rel, name), src, 0o644); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("go list named no files")
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+module+"\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("go vet at go 1.21: %v\n%s", err, out)
	}
}

// TestInternalShips holds docs/architecture.md "Architecture"'s rule for the tree:
// internal/ holds what the flashgate binary links, and nothing else but
// internal/testing/…, the test helpers, which no binary links. A package
// main belongs under tools/ (or its own module), a suite of tests under
// test/, an example under examples/. go list answers: the packages under
// internal/ against go list -deps of every command of the module.
func TestInternalShips(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Name}}", "./internal/...").Output()
	if err != nil {
		t.Fatalf("go list ./internal/...: %v", err)
	}
	linked := map[string]bool{}
	for _, d := range deps(t, "./cmd/...") {
		linked[d] = true
	}
	helpers := module + "/internal/testing/"
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, name, _ := strings.Cut(line, " ")
		n++
		switch {
		case name == "main":
			t.Errorf("%s is a package main: a program belongs under tools/ or examples/, not internal/", path)
		case strings.HasPrefix(path, helpers) && linked[path]:
			t.Errorf("%s is linked by a binary (go list -deps ./cmd/...): a test helper ships; move what ships out of internal/testing", path)
		case !strings.HasPrefix(path, helpers) && !linked[path]:
			t.Errorf("%s is under internal/ but no binary links it (go list -deps ./cmd/...): a test helper belongs under internal/testing/, a test suite under test/, an example under examples/", path)
		}
	}
	if n < 2 {
		t.Fatalf("go list ./internal/... named %d packages", n)
	}
}

// archDoc is the package map TestArchitectureTable holds to go list.
const archDoc = "docs/architecture.md"

// TestArchitectureTable: the first column of docs/architecture.md's
// package table names every package of the module (go list ./...) and
// nothing else (archProblems' rules).
func TestArchitectureTable(t *testing.T) {
	data, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
	}
	exists := func(p string) bool { _, err := os.Stat(filepath.FromSlash(p)); return err == nil }
	for _, p := range archProblems(string(data), pkgs, exists) {
		t.Error(archDoc + ": " + p)
	}
}

// TestArchitectureTableRules: archProblems reports a package the table
// misses, a row naming no package, a missing document, and nothing for a
// prefix row, the root, a document or a nested module.
func TestArchitectureTableRules(t *testing.T) {
	const d = "docs/" // (the fixture's documents, split so that TestDocLinks does not take them for citations)
	doc := "intro `ignored`\n\n| package | owns | imports |\n|---|---|---|\n" +
		"| `flashgate` (the module root) | x | |\n" +
		"| `server/`, `gone` | x | |\n" +
		"| `internal/testing/…` | x | |\n" +
		"| `" + d + "a.md`, `" + d + "b.md` | x | |\n" +
		"| `deploy/` | x | |\n" +
		"| internal/ (the rule) | x | |\n\nafter `tail`\n"
	pkgs := []string{"", "server", "issuer", "internal/testing/pgtest", "internal/testing/redistest"}
	exists := func(p string) bool { return p == d+"a.md" || p == "deploy/go.mod" }
	got := archProblems(doc, pkgs, exists)
	want := []string{
		"`gone` names no package of the module (go list ./...), document or module",
		"`" + d + "b.md`: no such file",
		"package issuer is missing from the table",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// archProblems checks the package table (the one whose header starts
// "| package |") of doc against pkgs, the module's packages relative to
// its root ("" is the root). A row's first cell names entries in
// backquotes: `flashgate` is the root; `dir/…` covers every package under
// dir; a path ending in .md names a document, which must exist; a
// directory with its own go.mod names a module; anything else must be a
// package. Every package must be named or covered.
func archProblems(doc string, pkgs []string, exists func(string) bool) []string {
	var problems []string
	named := map[string]bool{}
	var prefixes []string
	in := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "| package |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(l, "|---") {
			continue
		}
		if !strings.HasPrefix(l, "|") {
			break
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(l, "|"), "|")
		parts := strings.Split(first, "`")
		for i := 1; i < len(parts); i += 2 {
			e := parts[i]
			switch {
			case e == "flashgate":
				named[""] = true
			case strings.HasSuffix(e, "/…"):
				prefixes = append(prefixes, strings.TrimSuffix(e, "…"))
			case strings.HasSuffix(e, ".md"):
				if !exists(e) {
					problems = append(problems, "`"+e+"`: no such file")
				}
			default:
				p := strings.TrimSuffix(e, "/")
				if slices.Contains(pkgs, p) {
					named[p] = true
				} else if !exists(p + "/go.mod") {
					problems = append(problems, "`"+e+"` names no package of the module (go list ./...), document or module")
				}
			}
		}
	}
	if !in {
		return []string{"no table whose header starts with | package |"}
	}
	for _, p := range pkgs {
		covered := named[p]
		for _, pre := range prefixes {
			covered = covered || strings.HasPrefix(p, pre)
		}
		if !covered {
			problems = append(problems, "package "+p+" is missing from the table")
		}
	}
	return problems
}
