// Package wasmbuild gives tests the flashgate wasm verifier module:
// $FLASHGATE_WASM when set (absolute, or relative to the repository root),
// else a fresh build by scripts/build-wasm.sh into a temporary directory,
// once per test binary. Without TinyGo (scripts/install-tinygo.sh) and
// without $FLASHGATE_WASM the calling test fails; it does not skip.
package wasmbuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once     sync.Once
	path     string
	errText  string
	buildDir string // the temporary directory of a build, for Cleanup
)

// Root returns the repository root: the nearest ancestor of the working
// directory holding go.mod.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("wasmbuild: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Path returns the path of the module (see the package comment). A build
// lives in a temporary directory until Cleanup (call it from TestMain).
func Path(tb testing.TB) string {
	tb.Helper()
	root := Root(tb)
	once.Do(func() {
		if p := os.Getenv("FLASHGATE_WASM"); p != "" {
			if !filepath.IsAbs(p) {
				p = filepath.Join(root, p)
			}
			if _, err := os.Stat(p); err != nil {
				errText = "FLASHGATE_WASM: " + err.Error()
				return
			}
			path = p
			return
		}
		if err := exec.Command(filepath.Join(root, "scripts", "install-tinygo.sh"), "--check").Run(); err != nil {
			errText = "TinyGo is not installed: run scripts/install-tinygo.sh (or `make wasm`) first, " +
				"or set FLASHGATE_WASM to a built module (" + err.Error() + ")"
			return
		}
		dir, err := os.MkdirTemp("", "flashgate-wasm-")
		if err != nil {
			errText = err.Error()
			return
		}
		buildDir = dir
		p := filepath.Join(dir, "flashgate-verifier.wasm")
		cmd := exec.Command(filepath.Join(root, "scripts", "build-wasm.sh"), p)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			errText = "scripts/build-wasm.sh failed: " + err.Error() + "\n" + string(out)
			return
		}
		path = p
	})
	if errText != "" {
		tb.Fatal(errText)
	}
	return path
}

// Cleanup removes the module Path built, if it built one. Call it from
// TestMain after m.Run.
func Cleanup() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}
