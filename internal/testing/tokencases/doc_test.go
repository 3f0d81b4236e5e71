package tokencases

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// attackDoc is docs/token-attacks.md, from this package's directory.
var attackDoc = filepath.Join("..", "..", "..", "docs", "token-attacks.md")

// TestAttackDocNamesExist keeps docs/token-attacks.md honest: every
// numbered item 1–20 of its table names at least one test, and every name
// is either a case of this table or a Test/Fuzz/Benchmark function declared
// in a _test.go file of the module, in one of the files or directories the
// row's "Where" column lists.
func TestAttackDocNamesExist(t *testing.T) {
	doc, err := os.ReadFile(attackDoc)
	if err != nil {
		t.Fatalf("read %s: %v", attackDoc, err)
	}
	set, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{}
	for _, c := range set.Cases {
		cases[c.Name] = true
	}
	funcs := testFuncs(t, filepath.Join("..", "..", ".."))

	row := regexp.MustCompile(`^\|\s*(\d+)\s*\|`)
	name := regexp.MustCompile("`([A-Za-z0-9_]+)`")
	seen := map[int]int{}
	for _, line := range strings.Split(string(doc), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		item, _ := strconv.Atoi(m[1])
		cols := strings.Split(line, "|")
		if len(cols) != 7 { // "", #, attack, names, where, sources, ""
			t.Errorf("item %d: want 5 columns, got %d: %s", item, len(cols)-2, line)
			continue
		}
		where := strings.Split(cols[4], ",")
		for _, n := range name.FindAllStringSubmatch(cols[3], -1) {
			nm := n[1]
			seen[item]++
			if cases[nm] {
				if !listed(where, "internal/testing/tokencases") {
					t.Errorf("item %d: %s is a table case but internal/testing/tokencases is not in the row's Where column", item, nm)
				}
				continue
			}
			files, ok := funcs[nm]
			if !ok {
				t.Errorf("item %d: %q is neither a tokencases case nor a Test/Fuzz/Benchmark function", item, nm)
				continue
			}
			found := false
			for _, f := range files {
				if listed(where, f) {
					found = true
				}
			}
			if !found {
				t.Errorf("item %d: %s is declared in %v, not in the row's Where column %q", item, nm, files, cols[4])
			}
		}
	}
	for i := 1; i <= 20; i++ {
		if seen[i] == 0 {
			t.Errorf("item %d has no named test in %s", i, attackDoc)
		}
	}
	t.Logf("%d items, %d names checked", len(seen), sum(seen))
}

// listed reports whether file (slash-separated, relative to the module
// root) is one of the Where entries or lies under one of them.
func listed(where []string, file string) bool {
	for _, w := range where {
		w = strings.TrimSpace(w)
		if w != "" && (file == w || strings.HasPrefix(file, strings.TrimSuffix(w, "/")+"/")) {
			return true
		}
	}
	return false
}

func sum(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// testFuncs maps the name of every top-level Test*, Fuzz* and Benchmark*
// function in the module's _test.go files to the files declaring it
// (slash-separated, relative to root).
func testFuncs(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "build", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil { // e.g. a file being edited: its names are then reported missing
			t.Logf("skipping %s: %v", path, err)
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil {
				continue
			}
			n := fn.Name.Name
			if strings.HasPrefix(n, "Test") || strings.HasPrefix(n, "Fuzz") || strings.HasPrefix(n, "Benchmark") {
				out[n] = append(out[n], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan test files: %v", err)
	}
	return out
}
