package flashgate_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/version"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestImportDirection holds the package graph docs/architecture.md#architecture draws:
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
		// The Redis gateway: go-redis and the scripts, nothing of the layers above.
		{pkg: module + "/issuer/store", forbidden: []string{module + "/verifier", module + "/server", module + "/keys",
			module + "/order", module + "/problem", module + "/journal", "fiber", "fasthttp", "jwx", "prometheus", "wazero", "miniredis"}},
		{pkg: module + "/issuer/lua", onlyModule: true, forbidden: []string{module + "/issuer/store", module + "/internal/", module + "/server"}},
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

// TestInternalShips holds docs/architecture.md#architecture's rule for the tree:
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

// TestEnterWalk holds docs/architecture.md#walk-of-one-enter to the code:
// every function a row names is declared in the row's file, and no file has
// two rows (a layer's part of the walk is one file).
func TestEnterWalk(t *testing.T) {
	data, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := walkRows(string(data))
	if len(rows) < 8 {
		t.Fatalf("%s: %d rows under %q: the table is gone or unread", archDoc, len(rows), walkHeading)
	}
	for _, p := range walkProblems(rows, goDecls) {
		t.Error(archDoc + ": " + p)
	}
}

// TestEnterWalkRules: walkProblems reports a function its file does not
// declare, a file named by two rows, and a file that does not parse, and
// nothing for a method, a function or a non-identifier in backquotes.
func TestEnterWalkRules(t *testing.T) {
	doc := "## Walk of one enter\n\n| step | layer | file | functions |\n|---|---|---|---|\n" +
		"| 1 | a | `a.go` | `T.M` then `f` (EVALSHA of `lua/x.lua`, read as in `x.go`) |\n" +
		"| 2 | b | `b.go` | `gone` |\n" +
		"| 3 | a | `a.go` | `f` |\n" +
		"| 4 | c | `c.go` | `f` |\n\n## Next\n\n| step | layer | file | functions |\n|---|---|---|---|\n" +
		"| 9 | z | `z.go` | `nothing` |\n"
	rows := walkRows(doc)
	if len(rows) != 4 {
		t.Fatalf("walkRows read %d rows, want 4 (the section's table only)", len(rows))
	}
	decls := func(file string) (map[string]bool, error) {
		switch file {
		case "a.go":
			return map[string]bool{"T.M": true, "f": true}, nil
		case "b.go":
			return map[string]bool{"f": true}, nil
		}
		return nil, os.ErrNotExist
	}
	got := walkProblems(rows, decls)
	want := []string{
		"step 2: b.go declares no gone",
		"step 3: a.go is also step 1's: a layer's part of the walk is one file",
		"step 4: c.go: " + os.ErrNotExist.Error(),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// walkHeading is the section of archDoc that holds the walk.
const walkHeading = "## Walk of one enter"

// walkRow is one row of the walk: its step, its file and the functions
// (Func or Recv.Method) it names there.
type walkRow struct {
	step, file string
	funcs      []string
}

var (
	backquoted = regexp.MustCompile("`([^`]+)`")
	goIdent    = regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$`)
	fileName   = regexp.MustCompile(`\.(go|lua|md)$`)
)

// walkRows reads the table of doc's walkHeading section: | step | layer |
// `file` | text with the functions in backquotes |. A backquoted word that
// is not an identifier or Recv.Method (a path, a file name, a Lua reply) is
// not a function.
func walkRows(doc string) []walkRow {
	_, sec, ok := strings.Cut("\n"+doc, "\n"+walkHeading+"\n")
	if !ok {
		return nil
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var rows []walkRow
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if len(cells) != 4 {
			continue
		}
		file := backquoted.FindStringSubmatch(cells[2])
		if file == nil {
			continue // the header and its rule
		}
		r := walkRow{step: strings.TrimSpace(cells[0]), file: file[1]}
		for _, m := range backquoted.FindAllStringSubmatch(cells[3], -1) {
			if goIdent.MatchString(m[1]) && !fileName.MatchString(m[1]) {
				r.funcs = append(r.funcs, m[1])
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// walkProblems checks rows against decls, which returns the functions and
// methods a file declares (Func, Recv.Method).
func walkProblems(rows []walkRow, decls func(file string) (map[string]bool, error)) []string {
	var problems []string
	first := map[string]string{}
	for _, r := range rows {
		if s, ok := first[r.file]; ok {
			problems = append(problems, fmt.Sprintf("step %s: %s is also step %s's: a layer's part of the walk is one file", r.step, r.file, s))
			continue
		}
		first[r.file] = r.step
		have, err := decls(r.file)
		if err != nil {
			problems = append(problems, fmt.Sprintf("step %s: %s: %v", r.step, r.file, err))
			continue
		}
		for _, f := range r.funcs {
			if !have[f] {
				problems = append(problems, fmt.Sprintf("step %s: %s declares no %s", r.step, r.file, f))
			}
		}
	}
	return problems
}

// goDecls parses file and returns its functions and methods: "Func" and
// "Recv.Method" (the receiver's type name, without * or type parameters).
func goDecls(file string) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.FromSlash(file), nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			t := fd.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			switch x := t.(type) {
			case *ast.IndexExpr:
				t = x.X
			case *ast.IndexListExpr:
				t = x.X
			}
			if id, ok := t.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		out[name] = true
	}
	return out, nil
}

// TestIssuerFileMap holds docs/architecture.md#the-issuers-files-by-role
// to issuer/: every non-test Go file of the package is in the table
// (script_<name>.go stands for the script files), and every file the table
// names exists.
func TestIssuerFileMap(t *testing.T) {
	data, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("issuer", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			names = append(names, filepath.Base(f))
		}
	}
	exists := func(name string) bool { _, err := os.Stat(filepath.Join("issuer", name)); return err == nil }
	for _, p := range fileMapProblems(string(data), names, exists) {
		t.Error(archDoc + ": " + p)
	}
}

// TestIssuerFileMapRules: fileMapProblems reports a file the table misses
// and a named file that does not exist, and takes script_<name>.go for
// every script file.
func TestIssuerFileMapRules(t *testing.T) {
	doc := "## The issuer's files by role\n\n| layer | files | what |\n|---|---|---|\n" +
		"| a | `a.go`, `gone.go` | `notafile` |\n| s | `script_<name>.go`, `lua/` | x |\n\n## Next\n\n`b.go`\n"
	got := fileMapProblems(doc, []string{"a.go", "b.go", "script_enter.go", "doc.go"},
		func(name string) bool { return name == "a.go" })
	want := []string{"`gone.go`: no such file in issuer/", "issuer/b.go is in no row"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// fileMapHeading is the section of archDoc that maps issuer/'s files.
const fileMapHeading = "## The issuer's files by role"

// fileMapProblems checks the files column of doc's fileMapHeading table
// against names, the package's non-test files (doc.go needs no row).
func fileMapProblems(doc string, names []string, exists func(string) bool) []string {
	_, sec, _ := strings.Cut("\n"+doc, "\n"+fileMapHeading+"\n")
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var problems []string
	named := map[string]bool{"doc.go": true}
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if len(cells) != 3 {
			continue
		}
		for _, m := range backquoted.FindAllStringSubmatch(cells[1], -1) {
			name := m[1]
			if !strings.HasSuffix(name, ".go") {
				continue
			}
			named[name] = true
			if name != "script_<name>.go" && !exists(name) {
				problems = append(problems, "`"+name+"`: no such file in issuer/")
			}
		}
	}
	for _, n := range names {
		if !named[n] && !(named["script_<name>.go"] && strings.HasPrefix(n, "script_")) {
			problems = append(problems, "issuer/"+n+" is in no row")
		}
	}
	return problems
}

// TestNoArrowsBackUp holds the tree to its layers (go list, non-test
// imports): programs (cmd/..., the simulation, examples/, tools/, test/)
// sit on top and no library imports one; the libraries at the bottom of
// internal/ (key names, the context sleep, log buffering, the Redis
// topology) import no module package but the root and each other; the
// issuer's Redis gateway (issuer/store, issuer/lua) imports nothing of the
// issuer above it; and the shipped binary links no example. Each arrow
// against these rules is one error.
func TestNoArrowsBackUp(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range arrowProblems(strings.Split(strings.TrimSpace(string(out)), "\n")) {
		t.Error(p)
	}
	for _, d := range deps(t, module+"/cmd/flashgate") {
		if strings.HasPrefix(d, module+"/examples/") {
			t.Errorf("the flashgate binary links %s: an example is not part of what ships", d)
		}
	}
}

// arrowProblems checks go list lines "pkg import import…" (see TestNoArrowsBackUp).
func arrowProblems(lines []string) []string {
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	under := func(r string, dirs ...string) bool {
		for _, d := range dirs {
			if r == d || strings.HasPrefix(r, d+"/") {
				return true
			}
		}
		return false
	}
	program := func(r string) bool {
		return under(r, "cmd", "examples", "tools", "test", "internal/simulate")
	}
	bottom := func(r string) bool {
		return under(r, "internal/roomkey", "internal/ctxtime", "internal/logbuf", "internal/redisconn")
	}
	var problems []string
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		p, ok := rel(f[0])
		if !ok || under(p, "internal/testing") {
			continue
		}
		for _, imp := range f[1:] {
			i, ok := rel(imp)
			if !ok {
				continue
			}
			switch {
			case !program(p) && program(i):
				problems = append(problems, fmt.Sprintf("%s → %s: a library imports a program", f[0], imp))
			case bottom(p) && imp != module && !bottom(i):
				problems = append(problems, fmt.Sprintf("%s → %s: a library at the bottom of internal/ imports one above it", f[0], imp))
			case under(p, "issuer/store", "issuer/lua") && i == "issuer":
				problems = append(problems, fmt.Sprintf("%s → %s: the Redis gateway imports the issuer above it", f[0], imp))
			}
		}
	}
	return problems
}

// TestArrowRules: arrowProblems reports each kind of arrow back up, and
// nothing for arrows down.
func TestArrowRules(t *testing.T) {
	m := module + "/"
	got := arrowProblems([]string{
		m + "issuer " + m + "internal/roomkey " + m + "issuer/store " + module,
		m + "issuer/store " + m + "issuer",
		m + "journal/consumer " + m + "internal/simulate",
		m + "internal/roomkey " + m + "issuer",
		m + "cmd/flashgate " + m + "examples/orderservice " + m + "issuer",
		m + "internal/testing/redistest " + m + "cmd/flashgate",
	})
	want := []string{
		m + "issuer/store → " + m + "issuer: the Redis gateway imports the issuer above it",
		m + "journal/consumer → " + m + "internal/simulate: a library imports a program",
		m + "internal/roomkey → " + m + "issuer: a library at the bottom of internal/ imports one above it",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestIssuerIsWiring holds docs/architecture.md#architecture's roles to the
// code: *issuer.Issuer declares no method (its methods are its roles':
// issuer.Queue, Admin, Ticker, Metrics), and neither package server nor
// flashgate serve names it in code (comments aside): the server takes its
// role interfaces, cmd/flashgate/wiring.go hands it the role types.
func TestIssuerIsWiring(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("issuer", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	methods := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		decls, err := goDecls(filepath.ToSlash(f))
		if err != nil {
			t.Fatal(err)
		}
		for d := range decls {
			if strings.HasPrefix(d, "Issuer.") {
				t.Errorf("%s declares %s: *Issuer is the wiring of the roles; a method belongs to Queue, Admin, Ticker, Metrics or core", f, d)
				methods++
			}
		}
	}
	for _, f := range append(mustGlob(t, "server/*.go"), "cmd/flashgate/serve.go") {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		if n := namesIssuerType(t, f); n > 0 {
			t.Errorf("%s names issuer.Issuer %d times: the server takes server.Queue, Admin and Observed, the wiring hands it the role types", f, n)
		}
	}
	t.Logf("*Issuer methods: %d", methods)
}

// mustGlob is filepath.Glob, failing t on a bad pattern.
func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.FromSlash(pattern))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// namesIssuerType counts the selector expressions issuer.Issuer in file's
// code (not its comments).
func namesIssuerType(t *testing.T, file string) int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(x ast.Node) bool {
		if s, ok := x.(*ast.SelectorExpr); ok && s.Sel.Name == "Issuer" {
			if id, ok := s.X.(*ast.Ident); ok && id.Name == "issuer" {
				n++
			}
		}
		return true
	})
	return n
}
