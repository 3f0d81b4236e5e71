package verifierjs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/internal/testing/wasmbuild"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/verifier"
)

// TestNodePackage runs the package's Node tests (test/*.test.mjs): the
// whole case table on both crypto paths, the JWK Set cache, the options.
func TestNodePackage(t *testing.T) {
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node (≥ 20) is required to test flashgate-verifier")
	files, err := filepath.Glob(filepath.Join("test", "*.test.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	if _, err := os.Stat(filepath.Join("node_modules", "@noble", "curves")); err != nil { // beacon.js's BLS12-381 (issue 36)
		out, err := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error").CombinedOutput()
		require.NoError(t, err, "npm ci (@noble/curves) in js/flashgate-verifier:\n%s", out)
	}
	cmd := exec.Command(node, append([]string{"--test"}, files...)...)
	cmd.Env = append(os.Environ(), "FLASHGATE_WASM="+wasmbuild.Path(t))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "node --test %v:\n%s", files, out)
	t.Logf("node --test: %s", summary(out))
}

// summary returns the "# pass N" and "# fail N" lines of TAP output.
func summary(out []byte) string {
	var s []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "# pass") || strings.HasPrefix(l, "# fail") {
			s = append(s, strings.TrimPrefix(l, "# "))
		}
	}
	return strings.Join(s, ", ")
}

// TestNpmPack packs the package as `npm pack` would publish it, installs the
// tarball by name into a fresh project, and verifies a token there with the
// README's three lines (the module loaded from beside index.js).
func TestNpmPack(t *testing.T) {
	npm, err := exec.LookPath("npm")
	require.NoError(t, err, "npm is required to test flashgate-verifier's packing")
	tmp := t.TempDir()
	pkg := filepath.Join(tmp, "pkg")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	for _, f := range []string{"package.json", "index.js", "index.d.ts", "beacon.js", "README.md"} {
		copyFile(t, f, filepath.Join(pkg, f))
	}
	copyFile(t, wasmbuild.Path(t), filepath.Join(pkg, "flashgate-verifier.wasm"))

	run := func(dir string, name string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(tmp, "npm-cache"), "npm_config_update_notifier=false")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output() // stdout only: npm warns on stderr
		require.NoError(t, err, "%s %v:\n%s%s", name, args, out, stderr.String())
		return out
	}
	out := run(pkg, npm, "pack", "--json", "--pack-destination", tmp)
	var packed []struct {
		Filename string `json:"filename"`
		Files    []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	require.NoError(t, json.Unmarshal(out, &packed), "npm pack --json:\n%s", out)
	require.Len(t, packed, 1)
	var paths []string
	for _, f := range packed[0].Files {
		paths = append(paths, f.Path)
	}
	sort.Strings(paths)
	require.Equal(t, []string{"README.md", "beacon.js", "flashgate-verifier.wasm", "index.d.ts", "index.js", "package.json"}, paths)

	app := filepath.Join(tmp, "app")
	require.NoError(t, os.MkdirAll(app, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(app, "package.json"), []byte(`{"name":"app","private":true,"type":"module"}`), 0o644))
	run(app, npm, "install", "--no-audit", "--no-fund", "--offline", filepath.Join(tmp, packed[0].Filename))

	set := tokencases.MustLoad(t, tokencases.GoldenPath(2))
	var valid tokencases.Case
	for _, c := range set.Cases {
		if c.Name == "valid" {
			valid = c
		}
	}
	require.NotEmpty(t, valid.Token)
	script := `import { Verifier } from "flashgate-verifier";
const v = await Verifier.create({ jwks: process.env.JWKS, issuer: process.env.ISS, audience: process.env.AUD });
const r = await v.verify(process.env.TOKEN, { product: process.env.PRODUCT, now: Number(process.env.NOW) * 1000 });
console.log(JSON.stringify({ crypto: v.crypto, ...r }));
`
	require.NoError(t, os.WriteFile(filepath.Join(app, "main.mjs"), []byte(script), 0o644))
	cmd := exec.Command("node", "main.mjs")
	cmd.Dir = app
	cmd.Env = append(os.Environ(), "JWKS="+string(set.JWKS), "ISS="+set.Issuer, "AUD="+set.Audience,
		"TOKEN="+valid.Token, "PRODUCT="+valid.Product, "NOW="+itoa(valid.Now))
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "node main.mjs:\n%s", out)
	var got struct {
		Crypto string `json:"crypto"`
		Valid  bool   `json:"valid"`
		Reason string `json:"reason"`
		Claims struct {
			JTI string `json:"jti"`
		} `json:"claims"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.True(t, got.Valid, "%s", out)
	require.Equal(t, "host", got.Crypto)
	require.Equal(t, valid.WantClaims.ID, got.Claims.JTI)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestProblemsMatchGo: the package's PROBLEMS (the HTTP answer per refusal
// reason, used by refusal() and the example Worker) says what problem.Token
// says, reason by reason, for every verifier code and "missing".
func TestProblemsMatchGo(t *testing.T) {
	out, err := exec.Command("node", "--input-type=module", "-e",
		`import { PROBLEMS } from "./index.js"; console.log(JSON.stringify(PROBLEMS));`).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var js map[string]struct {
		Status     int    `json:"status"`
		Title      string `json:"title"`
		Challenge  string `json:"challenge"`
		RetryAfter int    `json:"retryAfter"`
	}
	require.NoError(t, json.Unmarshal(out, &js), "%s", out)
	reasons := []string{"missing"}
	for c := verifier.Code(1); c.String() != "unknown"; c++ {
		reasons = append(reasons, c.String())
	}
	require.Len(t, js, len(reasons), "PROBLEMS has %d reasons, the verifier %d (+ missing)", len(js), len(reasons)-1)
	for _, r := range reasons {
		k := problem.Token(r)
		got, ok := js[r]
		if !assert.True(t, ok, "PROBLEMS lacks %s", r) {
			continue
		}
		assert.Equal(t, k.Status, got.Status, "%s status", r)
		assert.Equal(t, k.Title, got.Title, "%s title", r)
		assert.Equal(t, k.Challenge, got.Challenge, "%s challenge", r)
		assert.Equal(t, k.RetryAfter, got.RetryAfter, "%s Retry-After", r)
	}
}

// TestTypeDeclarations compiles test/types/usage.ts (the README's uses, and
// misuse marked @ts-expect-error) against index.d.ts with tsc --strict. tsc
// is the package's one devDependency (npm ci here when it is missing).
func TestTypeDeclarations(t *testing.T) {
	tsc := filepath.Join("node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci (typescript) in js/flashgate-verifier:\n%s", out)
	}
	out, err := exec.Command(tsc, "-p", filepath.Join("test", "types", "tsconfig.json")).CombinedOutput()
	require.NoError(t, err, "tsc --strict over test/types/usage.ts:\n%s", out)
}
