package testkit

import (
	"bytes"
	"os"
	"testing"
)

// Golden holds the committed file path equal to got, the output of the
// generator it records; with update (a test's -update flag) it first
// rewrites path from got. regen is the command that regenerates it, named
// in the failure.
func Golden(tb testing.TB, path string, got []byte, update bool, regen string) {
	tb.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		tb.Fatalf("%s differs from its generator (%d vs %d bytes): regenerate with %s and review the diff", path, len(got), len(want), regen)
	}
}
