package browser_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/server"
)

// TestBrowserEnterPoW: with FLASHGATE_ENTER_POW at the recommended
// difficulty, a visitor's waiting page shows "Checking your browser…",
// solves the proof of work in Chromium (WebCrypto SHA-256) on a CPU
// throttled 4× (a phone-class CPU) and joins the line, with the
// flashgate_pow pass set; a reload then keeps the place without solving
// again. Each solve's time is logged (data-pow-ms); FLASHGATE_POW_RUNS
// (default 3) fresh visitors are measured, FLASHGATE_POW_THROTTLE (default
// 4) sets the slowdown and FLASHGATE_POW_BITS (default
// server.RecommendedEnterPoW) the difficulty.
func TestBrowserEnterPoW(t *testing.T) {
	runs, rate, bits := 3, 4.0, server.RecommendedEnterPoW
	if v := os.Getenv("FLASHGATE_POW_BITS"); v != "" {
		b, err := strconv.Atoi(v)
		require.NoError(t, err)
		bits = b
	}
	if v := os.Getenv("FLASHGATE_POW_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		runs = n
	}
	if v := os.Getenv("FLASHGATE_POW_THROTTLE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err)
		rate = r
	}
	start := time.Now()
	shots := screenshotDir(t)
	br := launchBrowser(t)
	is := startPoWIssuer(t, bits)
	room := redistest.Room("pow")
	// Paused: every visitor below waits in line, one place each.
	admin(t, is.base, "PUT", "/admin/rooms/"+room, `{"capacity":1,"rate_per_minute":60,"state":"paused"}`)
	page := is.base + "/wait/" + room

	var took []int
	tried := 0
	for i := range runs {
		ctx, tab := "visitor"+strconv.Itoa(i), "tab"+strconv.Itoa(i)
		br.newContext(ctx, true)
		br.newPage(ctx, tab)
		br.throttle(tab, rate)
		status, _ := br.goTo(tab, page)
		require.Equal(t, 200, status)
		v := waitFor(t, br, tab, "in line after the proof of work", 90*time.Second, func(v view) bool {
			return v.state() == "paused" && v.PoWMs != nil
		})
		require.Equal(t, strconv.Itoa(i+1), v.position(), "each visitor is one place")
		ms, err := strconv.Atoi(*v.PoWMs)
		require.NoError(t, err)
		took = append(took, ms)
		hashes, err := strconv.Atoi(deref(v.PoWHash))
		require.NoError(t, err)
		tried += hashes
		c := br.cookies(ctx)
		require.Contains(t, c, server.PoWCookie, "the pass is set")
		require.True(t, c[server.PoWCookie].HTTPOnly)
		if i == 0 {
			br.screenshot(tab, filepath.Join(shots, "pow-01-in-line.png"))
			// A reload keeps the place and solves nothing (the page enters at once).
			_, _ = br.goTo(tab, page)
			v = waitFor(t, br, tab, "in line after reload", 10*time.Second, func(v view) bool { return v.state() == "paused" })
			require.Nil(t, v.PoWMs, "no proof of work again")
			require.Equal(t, "1", v.position())
		}
	}
	slices.Sort(took)
	sum := 0
	for _, ms := range took {
		sum += ms
	}
	// The solve time is random (the number is uniform in [0, 2^bits]): the
	// hash rate over all runs gives the expected time with less noise.
	rateHz := float64(tried) / (float64(sum) / 1000)
	t.Logf("%s: proof of work at %d bits, CPU throttled %g×: %d solves, ms sorted %v, mean %d ms; "+
		"%.0f SHA-256/s, so 2^(bits−1) takes %.2f s on average (bits 13…17: %.2f %.2f %.2f %.2f %.2f s)",
		time.Since(start).Round(time.Millisecond), bits, rate, len(took), took, sum/len(took), rateHz,
		float64(int(1)<<(bits-1))/rateHz, 4096/rateHz, 8192/rateHz, 16384/rateHz, 32768/rateHz, 65536/rateHz)
}

// startPoWIssuer starts `flashgate serve` in visitor mode over plain http
// (a secure context on 127.0.0.1) with FLASHGATE_ENTER_POW = bits.
func startPoWIssuer(t *testing.T, bits int) *issuerProc {
	t.Helper()
	bin := buildFlashgate(t)
	rs := redistest.Start(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return startIssuer(t, bin, map[string]string{
		"REDIS_URL":                  "redis://" + rs.Addr + "/0",
		"FLASHGATE_KEYS_FILE":        filepath.Join(t.TempDir(), "keys.json"),
		"FLASHGATE_ADMIN_TOKEN":      adminToken,
		"FLASHGATE_IDENTITY":         "visitor",
		"FLASHGATE_VISITOR_KEY":      base64.StdEncoding.EncodeToString(key),
		"FLASHGATE_INSECURE_COOKIES": "true",
		"FLASHGATE_ENTER_POW":        strconv.Itoa(bits),
		"FLASHGATE_LOG_LEVEL":        "warn",
	})
}

// TestALTCHACompat holds flashgate's proof of work to ALTCHA's own library
// (altcha-lib 1.4.1, the classic format its widget solves; altcha_compat.mjs):
// a challenge from GET /v1/challenge solved by altcha-lib enters, and a
// solution of flashgate-client.js's solvePoW passes altcha-lib's
// verifySolution (a wrong number does not).
func TestALTCHACompat(t *testing.T) {
	is := startPoWIssuer(t, 10)
	room := redistest.Room("altcha")
	admin(t, is.base, "PUT", "/admin/rooms/"+room, `{"capacity":5,"state":"open"}`)

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	res, err := hc.Get(is.base + "/v1/challenge")
	require.NoError(t, err)
	ch, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode, "%s", ch)

	node := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("node", append([]string{"altcha_compat.mjs"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "node altcha_compat.mjs %s (run npm ci in examples/browser):\n%s", args[0], stderr.String())
		return strings.TrimSpace(string(out))
	}
	payload := node("solve", string(ch))
	body, _ := json.Marshal(map[string]string{"pow": payload})
	res, err = hc.Post(is.base+"/v1/rooms/"+room+"/enter", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode, "altcha-lib's solution refused: %s", b)
	var e map[string]any
	require.NoError(t, json.Unmarshal(b, &e))
	require.Equal(t, "ACTIVE", e["state"])

	var v struct {
		OK           bool   `json:"ok"`
		WrongRefused bool   `json:"wrongRefused"`
		Salt         string `json:"salt"`
	}
	require.NoError(t, json.Unmarshal([]byte(node("verify-client")), &v))
	require.True(t, v.OK, "altcha-lib refuses solvePoW's solution (salt %s)", v.Salt)
	require.True(t, v.WrongRefused)
}
