package worker_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/workerdtest"
	"github.com/flashgate/flashgate/keys"
)

// throughputBudget: verifying and forwarding must keep at least this share of
// the requests/s of forwarding an unprotected path through the same worker.
const throughputBudget = 0.60

// BenchmarkWorkerdThroughput measures the edge worker from outside with wrk
// (one load generator, loopback): requests/s of a protected path (verify the
// token, then forward to the stub origin) against an unprotected path of the
// same worker (forward only) and against a worker answering a constant, for
// FLASHGATE_CRYPTO=host and =pure, all in one workerd. Rounds are
// interleaved and the table gives medians, with the host path's ratio next
// to throughputBudget (OVER when below; the benchmark reports, it does not
// fail) and next to testdata/rawverify.js, a worker doing only the
// signature check (the limit). Run it with
// scripts/bench-workerd.sh, or
//
//	go test -run '^$' -bench WorkerdThroughput ./examples/cloudflare-worker/
//
// Environment: FLASHGATE_BENCH_ROUNDS (default 3), FLASHGATE_BENCH_DURATION
// (wrk -d, default 5s), FLASHGATE_BENCH_CONNECTIONS (wrk -c, default 32),
// FLASHGATE_BENCH_THREADS (wrk -t, default 1).
func BenchmarkWorkerdThroughput(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Fatalf("wrk is not installed (%v): apt-get install -y wrk", err)
	}
	rounds := envInt(b, "FLASHGATE_BENCH_ROUNDS", 3)
	duration := envOr("FLASHGATE_BENCH_DURATION", "5s")
	conns := envOr("FLASHGATE_BENCH_CONNECTIONS", "32")
	threads := envOr("FLASHGATE_BENCH_THREADS", "1")
	bin := workerdBinary(b)
	wasm := wasmModule(b)

	// Stub issuer (the JWK Set, max-age as `flashgate serve` sends it) and
	// stub origin.
	ring, err := keys.Generate(time.Now())
	require.NoError(b, err)
	jwks, err := ring.PublicJWKS()
	require.NoError(b, err)
	issuerSrv := stubIssuer(b, jwks, "public, max-age=60")
	originSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("origin ok"))
	}))
	b.Cleanup(originSrv.Close)
	// The token stays valid for the whole run (900 s, the maximum lifetime).
	now := time.Now()
	token := sign(b, ring, "bench", "shoes", "bench-jti", now.Add(-time.Minute), now.Add(14*time.Minute))

	dir := b.TempDir()
	workerdtest.CopyFile(b, "worker.js", filepath.Join(dir, "worker.js"))
	workerdtest.CopyFile(b, wasm, filepath.Join(dir, "flashgate-verifier.wasm"))
	workerdtest.Package(b, dir)
	workerdtest.CopyFile(b, filepath.Join("testdata", "rawverify.js"), filepath.Join(dir, "rawverify.js"))
	var jwk struct {
		Keys []struct {
			KID string `json:"kid"`
			X   string `json:"x"`
		} `json:"keys"`
	}
	require.NoError(b, json.Unmarshal(jwks, &jwk))
	keyX := ""
	for _, k := range jwk.Keys {
		if k.KID == kidOf(b, token) {
			keyX = k.X
		}
	}
	require.NotEmpty(b, keyX, "the token's kid is not in the JWK Set")
	lns := map[string]net.Listener{}
	vars := map[string]string{
		"ISSUER_ADDR": strings.TrimPrefix(issuerSrv.URL, "http://"),
		"ORIGIN_ADDR": strings.TrimPrefix(originSrv.URL, "http://"),
		"KEY_X":       keyX,
	}
	for _, name := range []string{"host", "pure", "constant", "limit"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(b, err)
		lns[name] = ln
		vars[strings.ToUpper(name)+"_PORT"] = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	bases := workerdtest.LaunchSockets(b, bin, dir, filepath.Join("testdata", "bench.capnp.tmpl"), vars, lns, "host", "/products/")

	type target struct{ name, url string }
	targets := []target{
		{"host/verify", bases["host"] + "/products/shoes/buy"},
		{"host/forward", bases["host"] + "/about"},
		{"pure/verify", bases["pure"] + "/products/shoes/buy"},
		{"pure/forward", bases["pure"] + "/about"},
		{"constant", bases["constant"] + "/"},
		{"limit", bases["limit"] + "/products/shoes/buy"},
	}
	// Every target answers 200 before it is measured (and the Verifiers are
	// built, the JWK Set fetched).
	client := &http.Client{Timeout: 10 * time.Second}
	for _, tg := range targets {
		req, _ := http.NewRequest(http.MethodGet, tg.url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		require.NoError(b, err, tg.name)
		_ = resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode, tg.name)
	}
	log := workerdtest.Log(b, dir)
	for _, c := range []string{"host", "pure"} {
		require.Contains(b, log, "flashgate: verifier ready: crypto "+c+" (FLASHGATE_CRYPTO="+c+")")
	}

	run := func(tg target, d string) float64 {
		out, err := exec.Command(wrk, "-t"+threads, "-c"+conns, "-d"+d,
			"-H", "Authorization: Bearer "+token, tg.url).CombinedOutput()
		require.NoError(b, err, "wrk %s: %s", tg.name, out)
		if m := regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`).FindSubmatch(out); m != nil {
			b.Fatalf("wrk %s: %s answers were not 2xx:\n%s", tg.name, m[1], out)
		}
		if m := regexp.MustCompile(`Socket errors: .*`).Find(out); m != nil {
			b.Fatalf("wrk %s: %s\n%s", tg.name, m, out)
		}
		m := regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`).FindSubmatch(out)
		require.NotNil(b, m, "wrk %s: no Requests/sec in\n%s", tg.name, out)
		rps, err := strconv.ParseFloat(string(m[1]), 64)
		require.NoError(b, err)
		return rps
	}
	for _, tg := range targets {
		run(tg, "1s") // warm-up: JIT, connections
	}
	got := map[string][]float64{}
	b.ResetTimer()
	for r := range rounds {
		// Interleaved, and the order rotates each round so no target always
		// follows the same one.
		for i := range targets {
			tg := targets[(i+r)%len(targets)]
			got[tg.name] = append(got[tg.name], run(tg, duration))
		}
	}
	b.StopTimer()

	med := func(name string) float64 { return median(got[name]) }
	fmt.Printf("\nworkerd throughput, loopback, wrk -t%s -c%s -d%s, %d interleaved rounds, medians (req/s)\n",
		threads, conns, duration, rounds)
	fmt.Printf("%-40s %10s %10s %7s %8s %s\n", "worker", "req/s", "forward", "ratio", "budget", "")
	for _, c := range []string{"host", "pure"} {
		v, f := med(c+"/verify"), med(c+"/forward")
		ratio := v / f
		// The budget is the shipped default's (FLASHGATE_CRYPTO=auto picks
		// host crypto in workerd); the pure path is reported next to it.
		budget, verdict := "—", ""
		if c == "host" {
			budget, verdict = fmt.Sprintf("≥ %.2f", throughputBudget), "PASS"
			if ratio < throughputBudget {
				verdict = "OVER"
			}
		}
		fmt.Printf("%-40s %10.0f %10.0f %7.3f %8s %s\n", "edge worker, "+c+" crypto, verify+forward", v, f, ratio, budget, verdict)
		b.ReportMetric(v, c+"-verify-req/s")
		b.ReportMetric(f, c+"-forward-req/s")
		b.ReportMetric(ratio, c+"-ratio")
	}
	l, f := med("limit"), med("host/forward")
	fmt.Printf("%-40s %10.0f %10.0f %7.3f %8s %s\n", "limit: raw WebCrypto verify+forward", l, f, l/f, "—", "")
	fmt.Printf("%-40s %10.0f\n", "constant answer", med("constant"))
	fmt.Printf("host crypto keeps %.2f of what the raw signature check alone allows\n", med("host/verify")/l)
	b.ReportMetric(l/f, "limit-ratio")
	b.ReportMetric(med("constant"), "constant-req/s")
	for _, tg := range targets {
		fmt.Printf("  %-13s rounds: %s\n", tg.name, strings.Trim(fmt.Sprintf("%.0f", got[tg.name]), "[]"))
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a whole number ≥ 1", name, v)
	}
	return n
}
