package tokencases

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/cases.json from Build")

// TestGolden: testdata/cases.json is exactly Encode(Build()), and loading it
// gives back Build's Set. Regenerate with
//
//	go test ./internal/testing/tokencases -run TestGolden -update
func TestGolden(t *testing.T) {
	set, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	want, err := Encode(set)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(GoldenFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(GoldenFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes, %d cases)", GoldenFile, len(want), len(set.Cases))
	}
	got, err := os.ReadFile(GoldenFile)
	if err != nil {
		t.Fatalf("%v (regenerate: go test ./internal/testing/tokencases -run TestGolden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from Build() (%d vs %d bytes): regenerate with "+
			"go test ./internal/testing/tokencases -run TestGolden -update and review the diff", GoldenFile, len(got), len(want))
	}
	loaded, err := Load(GoldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(loaded, set) {
		t.Fatal("Load(GoldenFile) differs from Build()")
	}
	if GoldenPath(0) != filepath.FromSlash("internal/testing/tokencases/"+GoldenFile) {
		t.Errorf("GoldenPath(0) = %s", GoldenPath(0))
	}
}
