package main

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// TestPprofAddrLoopbackOnly: FLASHGATE_PPROF_ADDR and FLASHGATE_METRICS_ADDR
// take a loopback address only, unless FLASHGATE_INSECURE_PPROF (or
// _METRICS) is set; a malformed one is refused either way.
func TestPprofAddrLoopbackOnly(t *testing.T) {
	for _, v := range []struct{ addr, insecure string }{
		{"FLASHGATE_PPROF_ADDR", "FLASHGATE_INSECURE_PPROF"},
		{"FLASHGATE_METRICS_ADDR", "FLASHGATE_INSECURE_METRICS"},
	} {
		t.Run(v.addr, func(t *testing.T) { testLoopbackOnly(t, v.addr, v.insecure) })
	}
}

func testLoopbackOnly(t *testing.T, addrVar, insecureVar string) {
	for _, tc := range []struct {
		addr     string
		insecure bool
		refused  string // substring of the error; "" = accepted
	}{
		{addr: ""},
		{addr: "127.0.0.1:6060"},
		{addr: "127.1.2.3:0"},
		{addr: "[::1]:6060"},
		{addr: "localhost:6060"},
		{addr: ":6060", refused: insecureVar + "=true"},
		{addr: "0.0.0.0:6060", refused: "not a loopback address"},
		{addr: "10.0.0.7:6060", refused: "not a loopback address"},
		{addr: "[::]:6060", refused: "not a loopback address"},
		{addr: "example.com:6060", refused: "not a loopback address"},
		{addr: "0.0.0.0:6060", insecure: true},
		{addr: ":6060", insecure: true},
		{addr: "127.0.0.1", refused: "must be host:port"},
		{addr: "6060", insecure: true, refused: "must be host:port"},
	} {
		env := map[string]string{addrVar: tc.addr}
		if tc.insecure {
			env[insecureVar] = "true"
		}
		_, err := loadServeEnv(env)
		if tc.refused == "" {
			assert.NoError(t, err, "%+v", tc)
		} else if assert.Error(t, err, "%+v", tc) {
			assert.Contains(t, err.Error(), tc.refused, "%+v", tc)
			assert.Contains(t, err.Error(), addrVar, "%+v", tc)
		}
	}
	c, err := loadServeEnv(map[string]string{})
	require.NoError(t, err)
	assert.Empty(t, c.Serve.PprofAddr+c.Serve.MetricsAddr, "off by default")
	t.Setenv(addrVar, "0.0.0.0:6060")
	r := runCLI(t, "", "serve")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, addrVar)
}

// TestServePprof: with FLASHGATE_PPROF_ADDR set, `flashgate serve` answers
// /debug/pprof/ there, the API address does not, and shutdown closes it.
func TestServePprof(t *testing.T) {
	pport := redistest.FreePort(t)
	prof := fmt.Sprintf("http://127.0.0.1:%d", pport)
	api, stop, stderr := startServeRedis(t, map[string]string{"FLASHGATE_PPROF_ADDR": fmt.Sprintf("127.0.0.1:%d", pport)})

	wantGet(t, prof+"/debug/pprof/", http.StatusOK, "goroutine")
	wantGet(t, prof+"/debug/pprof/goroutine?debug=1", http.StatusOK, "goroutine profile:")
	wantGet(t, api+"/debug/pprof/", http.StatusNotFound) // the public API does not serve the profiler
	wantGet(t, prof+"/healthz", http.StatusNotFound)     // the profiler's server serves nothing of the API
	assert.Contains(t, stderr.String(), "pprof profiler listening")

	assert.Equal(t, exitOK, stop(), stderr.String())
	_, _, err := httpGet(prof + "/debug/pprof/")
	assert.Error(t, err, "the profiler's listener is closed at shutdown")
}

// TestServeMetricsAddr: with FLASHGATE_METRICS_ADDR set, `flashgate serve`
// answers /metrics there and no longer on the API's listener, and shutdown
// closes it; unset, the API's listener serves /metrics (as before).
func TestServeMetricsAddr(t *testing.T) {
	t.Run("set", func(t *testing.T) {
		mport := redistest.FreePort(t)
		mon := fmt.Sprintf("http://127.0.0.1:%d", mport)
		api, stop, stderr := startServeRedis(t, map[string]string{"FLASHGATE_METRICS_ADDR": fmt.Sprintf("127.0.0.1:%d", mport)})
		wantGet(t, mon+"/metrics", http.StatusOK, "flashgate_sse_streams_limited_total", "flashgate_http_requests_total")
		wantGet(t, api+"/metrics", http.StatusNotFound) // the public API no longer serves the metrics
		wantGet(t, mon+"/healthz", http.StatusNotFound) // the metrics server serves nothing of the API
		assert.Equal(t, exitOK, stop(), stderr.String())
		assert.Contains(t, stderr.String(), "metrics listening on their own address")
		_, _, err := httpGet(mon + "/metrics")
		assert.Error(t, err, "the metrics listener is closed at shutdown")
	})
	t.Run("unset", func(t *testing.T) {
		api, stop, stderr := startServeRedis(t, nil)
		wantGet(t, api+"/metrics", http.StatusOK, "flashgate_sse_streams_limited_total")
		assert.Equal(t, exitOK, stop(), stderr.String())
		assert.Contains(t, stderr.String(), "/metrics is served on the API's listener")
	})
}

// wantGet GETs url and asserts the status and that the body contains each
// of contains.
func wantGet(t *testing.T, url string, status int, contains ...string) {
	t.Helper()
	code, body, err := httpGet(url)
	require.NoError(t, err, url)
	assert.Equal(t, status, code, url)
	for _, c := range contains {
		assert.Contains(t, body, c, url)
	}
}

// startServeRedis runs `flashgate serve` (startServe) on a redis-server of
// its own, with env set, and returns the API's base URL, the function that
// stops it and returns its exit code, and its stderr.
func startServeRedis(t *testing.T, env map[string]string) (api string, stop func() int, stderr *syncBuffer) {
	t.Helper()
	t.Setenv("REDIS_URL", "redis://"+redistest.Start(t).Addr+"/0")
	for k, v := range env {
		t.Setenv(k, v)
	}
	addr, stop, stderr := startServe(t)
	return "http://" + addr, stop, stderr
}

// httpGet GETs url and returns the status and body.
func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
