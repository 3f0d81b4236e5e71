package worker_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/internal/testing/workerdtest"
	"github.com/flashgate/flashgate/verifier"
)

// caseOutcome is what testdata/cases_harness.js reports for one case.
type caseOutcome struct {
	Name    string            `json:"name"`
	Skipped string            `json:"skipped"`
	Status  int               `json:"status"`
	Reason  string            `json:"reason"`
	Claims  map[string]string `json:"claims"`
	Body    string            `json:"body"`
	Crypto  string            `json:"crypto"`
}

// TestWorkerTokenCases runs the shared case table — the golden file
// internal/testing/tokencases/testdata/cases.json, the bytes the native verifier
// tests and the wazero harness run — through worker.js and the wasm module
// in workerd (testdata/cases_harness.js), and requires each case's verdict
// from the worker: the origin reached with the token's user, product and
// admission id, or the refusal reason named by the case. The table runs twice
// in one workerd, with FLASHGATE_CRYPTO=host (WebCrypto Ed25519 through
// verify_begin/verify_finish) and =pure (the module's own Ed25519), and every
// answer must name the path it was asked for (X-Flashgate-Crypto).
func TestWorkerTokenCases(t *testing.T) {
	bin := workerdBinary(t)
	wasm := wasmModule(t)
	golden := tokencases.GoldenPath(2)
	set := tokencases.MustLoad(t, golden)

	dir := t.TempDir()
	workerdtest.CopyFile(t, filepath.Join("testdata", "cases_harness.js"), filepath.Join(dir, "cases_harness.js"))
	workerdtest.CopyFile(t, "worker.js", filepath.Join(dir, "worker.js"))
	workerdtest.CopyFile(t, wasm, filepath.Join(dir, "flashgate-verifier.wasm"))
	workerdtest.CopyFile(t, golden, filepath.Join(dir, "cases.json"))
	workerdtest.Package(t, dir)
	wln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := workerdtest.Launch(t, bin, dir, filepath.Join("testdata", "cases.capnp.tmpl"), map[string]string{}, wln, "/ready")

	for _, crypto := range []string{"host", "pure"} {
		t.Run(crypto, func(t *testing.T) { runTokenCases(t, base, crypto, set) })
	}
	log := workerdtest.Log(t, dir)
	for _, crypto := range []string{"host", "pure"} {
		require.Contains(t, log, "flashgate: verifier ready: crypto "+crypto+" (FLASHGATE_CRYPTO="+crypto+")")
	}
}

func runTokenCases(t *testing.T, base, crypto string, set *tokencases.Set) {
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Get(base + "/?crypto=" + crypto)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var out struct {
		Cases   int           `json:"cases"`
		Results []caseOutcome `json:"results"`
	}
	require.NoError(t, json.Unmarshal(body, &out))
	require.Equal(t, len(set.Cases), out.Cases, "the harness read another table")
	require.Len(t, out.Results, len(set.Cases))

	ran, skipped := 0, map[string]int{}
	for i, c := range set.Cases {
		r := out.Results[i]
		require.Equal(t, c.Name, r.Name, "case order")
		if r.Skipped != "" {
			skipped[r.Skipped]++
			continue
		}
		ran++
		if r.Crypto != crypto {
			t.Errorf("%s: the worker answered with crypto %q, want %q", c.Name, r.Crypto, crypto)
		}
		if c.Want == verifier.CodeOK {
			if r.Status != http.StatusOK {
				t.Errorf("%s (%s): worker answered %d %s%s, want the origin", c.Name, c.Source, r.Status, r.Reason, r.Body)
				continue
			}
			w := c.WantClaims
			want := map[string]string{"sub": w.User, "product": w.Product, "jti": w.ID}
			if len(r.Claims) != len(want) || r.Claims["sub"] != want["sub"] || r.Claims["product"] != want["product"] || r.Claims["jti"] != want["jti"] {
				t.Errorf("%s: origin saw %v, want %v", c.Name, r.Claims, want)
			}
			continue
		}
		if r.Reason != c.Want.String() {
			t.Errorf("%s (%s): worker answered %d %q%s, want %q", c.Name, c.Source, r.Status, r.Reason, r.Body, c.Want)
		}
	}
	t.Logf("%d of %d cases run through workerd (crypto %s); not expressible as a worker request: %v", ran, len(set.Cases), crypto, skipped)
	// Most of the table must reach the worker; the skips are the cases
	// worker.js cannot be asked (see cases_harness.js).
	require.GreaterOrEqual(t, ran, len(set.Cases)*3/4, "too many cases skipped: %v", skipped)
}
