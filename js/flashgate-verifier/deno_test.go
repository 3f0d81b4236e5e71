package verifierjs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/internal/testing/wasmbuild"
	"github.com/flashgate/flashgate/verifier"
)

// denoDir is the npm project that pins Deno (package.json, package-lock.json).
const denoDir = "deno"

// denoPlatforms maps GOOS/GOARCH to the npm package that ships the binary
// (an optional dependency of the deno package).
var denoPlatforms = map[string]string{
	"linux/amd64":  "linux-x64-glibc",
	"linux/arm64":  "linux-arm64-glibc",
	"darwin/amd64": "darwin-x64",
	"darwin/arm64": "darwin-arm64",
}

var (
	denoOnce sync.Once
	denoPath string
	denoNote string
	denoErr  error
)

// denoBinary returns the pinned Deno, running `npm ci` in deno/ first when
// it is not installed. It fails t (never skips) when Deno cannot be had.
func denoBinary(t *testing.T) string {
	t.Helper()
	denoOnce.Do(func() { denoPath, denoNote, denoErr = installDeno() })
	if denoErr != nil {
		t.Fatalf("deno: %v", denoErr)
	}
	if denoNote != "" {
		t.Log(denoNote)
	}
	return denoPath
}

// installDeno returns the binary and, when it ran npm ci, a note on it.
func installDeno() (bin, note string, err error) {
	platform, ok := denoPlatforms[runtime.GOOS+"/"+runtime.GOARCH]
	if !ok {
		return "", "", fmt.Errorf("no Deno npm package for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	bin, err = filepath.Abs(filepath.Join(denoDir, "node_modules", "@deno", platform, "deno"))
	if err != nil {
		return "", "", err
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, "", nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", "", fmt.Errorf("not installed and no npm to install it (npm ci in js/flashgate-verifier/deno): %v", err)
	}
	start := time.Now()
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = denoDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("npm ci in js/flashgate-verifier/deno: %v\n%s", err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", "", fmt.Errorf("npm ci in js/flashgate-verifier/deno did not install %s: %v", bin, err)
	}
	return bin, fmt.Sprintf("npm ci in js/flashgate-verifier/deno installed Deno in %v", time.Since(start).Round(time.Millisecond)), nil
}

// jsAnswer is one verification result of the package, as the JS side
// reports it (test/deno_cases.mjs, test/diff_driver.mjs).
type jsAnswer struct {
	Reason  string          `json:"reason"`
	Claims  json.RawMessage `json:"claims,omitempty"`
	Message string          `json:"message,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// mismatch describes how a answers differently from the expected code
// name (and claims, for "ok"), or returns "".
func mismatch(a jsAnswer, want string, wc *tokencases.Claims) string {
	if a.Error != "" {
		return "threw: " + a.Error
	}
	if a.Reason != want {
		return fmt.Sprintf("reason %q (%s), want %q", a.Reason, a.Message, want)
	}
	if want != verifier.CodeOK.String() {
		if len(a.Claims) != 0 {
			return fmt.Sprintf("refused with claims %s", a.Claims)
		}
		return ""
	}
	got, err := tokencases.DecodeClaims(a.Claims)
	if err != nil {
		return err.Error()
	}
	if wc != nil && got != *wc {
		return fmt.Sprintf("claims %+v, want %+v", got, *wc)
	}
	return ""
}

type denoReport struct {
	Runtime string `json:"runtime"`
	Crypto  struct {
		Host string `json:"host"`
		Pure string `json:"pure"`
		Auto string `json:"auto"`
	} `json:"crypto"`
	SubtleVerifyCalls struct {
		Host int `json:"host"`
		Pure int `json:"pure"`
	} `json:"subtleVerifyCalls"`
	Results []struct {
		Name string   `json:"name"`
		Host jsAnswer `json:"host"`
		Pure jsAnswer `json:"pure"`
	} `json:"results"`
}

// TestDenoCases runs the whole case table through the package in Deno
// (test/deno_cases.mjs), with WebCrypto Ed25519 (crypto "host") and with
// the module's own Ed25519 (crypto "pure"): every case must get its
// expected reason and claims on both paths.
func TestDenoCases(t *testing.T) {
	wasm := wasmbuild.Path(t)
	deno := denoBinary(t)
	set := tokencases.MustLoad(t, tokencases.GoldenPath(2))
	casesPath, err := filepath.Abs(tokencases.GoldenPath(2))
	if err != nil {
		t.Fatal(err)
	}
	pkgDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	cmd := exec.Command(deno, "run", "--no-config", "--no-lock", "--no-prompt",
		"--allow-read="+strings.Join([]string{pkgDir, casesPath, wasm}, ","),
		filepath.Join("test", "deno_cases.mjs"), casesPath, wasm)
	cmd.Env = append(os.Environ(),
		"DENO_DIR="+t.TempDir(), "DENO_NO_UPDATE_CHECK=1", "DENO_NO_PACKAGE_JSON=1", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("deno run test/deno_cases.mjs: %v\n%s", err, stderr.Bytes())
	}
	var rep denoReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("deno_cases.mjs output: %v\nstdout: %.2000s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	t.Logf("%s: %d cases × 2 paths in %v", rep.Runtime, len(rep.Results), time.Since(start).Round(time.Millisecond))

	if rep.Crypto.Host != "host" || rep.Crypto.Pure != "pure" || rep.Crypto.Auto != "host" {
		t.Fatalf(`Verifier.crypto: %q for crypto "host", %q for "pure", %q for "auto" (Deno has WebCrypto Ed25519)`,
			rep.Crypto.Host, rep.Crypto.Pure, rep.Crypto.Auto)
	}
	if len(rep.Results) != len(set.Cases) {
		t.Fatalf("deno_cases.mjs answered %d cases, the table has %d", len(rep.Results), len(set.Cases))
	}

	var failed []string
	okCases := 0
	for i, c := range set.Cases {
		r := rep.Results[i]
		if r.Name != c.Name {
			t.Fatalf("result %d is for %q, the table's case is %q", i, r.Name, c.Name)
		}
		wc := c.WantClaims
		if c.Want == verifier.CodeOK {
			okCases++
		}
		want := c.Want.String()
		for _, p := range []struct {
			name string
			a    jsAnswer
		}{{"host", r.Host}, {"pure", r.Pure}} {
			if m := mismatch(p.a, want, wc); m != "" {
				t.Errorf("%s (%s): %s", c.Name, p.name, m)
				failed = append(failed, c.Name+"/"+p.name)
			}
		}
		if r.Host.Reason != r.Pure.Reason || !bytes.Equal(r.Host.Claims, r.Pure.Claims) {
			t.Errorf("%s: host %s %s, pure %s %s", c.Name, r.Host.Reason, r.Host.Claims, r.Pure.Reason, r.Pure.Claims)
			failed = append(failed, c.Name+"/host≠pure")
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d differences in Deno: %s", len(failed), strings.Join(failed, ", "))
	}

	// The host path checked signatures with WebCrypto (at least once per
	// accepted token); the pure path never did.
	if rep.SubtleVerifyCalls.Host < okCases || rep.SubtleVerifyCalls.Pure != 0 {
		t.Fatalf("crypto.subtle.verify calls: %d on the host path (want ≥ %d, one per accepted case), %d on the pure path (want 0)",
			rep.SubtleVerifyCalls.Host, okCases, rep.SubtleVerifyCalls.Pure)
	}
	t.Logf("all %d cases agree on both paths (%d WebCrypto Ed25519 checks on the host path)", len(set.Cases), rep.SubtleVerifyCalls.Host)
}
