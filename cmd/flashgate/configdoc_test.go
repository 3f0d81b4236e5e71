package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/internal/testing/testkit"
)

var update = flag.Bool("update", false, "rewrite the generated docs (docs/configuration.md) from the code")

// TestConfigurationDoc: docs/configuration.md is exactly writeConfigDoc's
// output, so the reference cannot drift from the env tags; -update
// rewrites it. Every variable of every env command is in it.
func TestConfigurationDoc(t *testing.T) {
	var b bytes.Buffer
	writeConfigDoc(&b)
	got := b.Bytes()
	testkit.Golden(t, configDoc, got, *update, "`make docs` (go test ./cmd/flashgate -run '^TestConfigurationDoc$' -update)")
	for _, c := range envCommands {
		for _, v := range envDoc(c.env, "") {
			if strings.ContainsAny(v.name, ", ") {
				t.Errorf("flashgate %s: variable %q: an env tag option leaked into the name", c.name, v.name)
			}
			if !strings.Contains(string(got), "| `"+v.name+"` |") {
				t.Errorf("flashgate %s: %s has no row", c.name, v.name)
			}
		}
	}
}

// TestConfigurationDocEscapes: a help text's | < > * cannot break the
// table or vanish as HTML.
func TestConfigurationDocEscapes(t *testing.T) {
	if got, want := markdownCell(`a | b <host>-<pid> *x* \`), `a \| b &lt;host&gt;-&lt;pid&gt; \*x\* \\`; got != want {
		t.Errorf("markdownCell = %q, want %q", got, want)
	}
}
