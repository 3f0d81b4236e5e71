package verifier_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/flashgate/flashgate/verifier"
)

// codeNames lists verifier.Code names by number, up to the first unknown.
func codeNames() []string {
	var names []string
	for c := verifier.Code(0); c.String() != "unknown"; c++ {
		names = append(names, c.String())
	}
	return names
}

// TestCodeTablesMatch: the hosts that cannot import this package keep
// copies of the result-code names — the flashgate-verifier JavaScript
// package's REASONS (js/flashgate-verifier/index.js, which the Worker uses)
// and the ABI table in wasm/README.md. They must say what Code.String says, code
// by code; adding or renaming a code without them fails here.
func TestCodeTablesMatch(t *testing.T) {
	want := codeNames()

	js, err := os.ReadFile("../js/flashgate-verifier/index.js")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)export const REASONS = Object\.freeze\(\[(.*?)\]\);`).FindSubmatch(js)
	if block == nil {
		t.Fatal("js/flashgate-verifier/index.js: no REASONS array")
	}
	var worker []string
	for _, m := range regexp.MustCompile(`"([a-z_]+)"`).FindAllSubmatch(block[1], -1) {
		worker = append(worker, string(m[1]))
	}
	if len(worker) != len(want) {
		t.Fatalf("index.js REASONS has %d names, verifier %d: %v", len(worker), len(want), worker)
	}
	for i := range want {
		if worker[i] != want[i] {
			t.Errorf("index.js REASONS[%d] = %q, verifier %q", i, worker[i], want[i])
		}
	}

	md, err := os.ReadFile("../wasm/README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| (\\d+) \\| `([a-z_]+)` \\|").FindAllSubmatch(md, -1)
	seen := map[int]bool{}
	for _, r := range rows {
		n, _ := strconv.Atoi(string(r[1]))
		if n >= 100 { // glue statuses, not verifier codes
			continue
		}
		seen[n] = true
		if n >= len(want) || string(r[2]) != want[n] {
			t.Errorf("wasm/README.md: code %d is %q, verifier says %q", n, r[2], verifier.Code(n).String())
		}
	}
	for i := range want {
		if !seen[i] {
			t.Errorf("wasm/README.md: code %d (%s) missing from the table", i, want[i])
		}
	}
}
