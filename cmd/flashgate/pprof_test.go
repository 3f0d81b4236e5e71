package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/redistest"
)

// TestPprofAddrLoopbackOnly: FLASHGATE_PPROF_ADDR takes a loopback address
// only, unless FLASHGATE_INSECURE_PPROF is set; a malformed one is refused
// either way.
func TestPprofAddrLoopbackOnly(t *testing.T) {
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
		{addr: ":6060", refused: "FLASHGATE_INSECURE_PPROF=true"},
		{addr: "0.0.0.0:6060", refused: "not a loopback address"},
		{addr: "10.0.0.7:6060", refused: "not a loopback address"},
		{addr: "[::]:6060", refused: "not a loopback address"},
		{addr: "example.com:6060", refused: "not a loopback address"},
		{addr: "0.0.0.0:6060", insecure: true},
		{addr: ":6060", insecure: true},
		{addr: "127.0.0.1", refused: "must be host:port"},
		{addr: "6060", insecure: true, refused: "must be host:port"},
	} {
		env := map[string]string{"FLASHGATE_PPROF_ADDR": tc.addr}
		if tc.insecure {
			env["FLASHGATE_INSECURE_PPROF"] = "true"
		}
		_, err := loadServeEnv(env)
		if tc.refused == "" {
			assert.NoError(t, err, "%+v", tc)
		} else if assert.Error(t, err, "%+v", tc) {
			assert.Contains(t, err.Error(), tc.refused, "%+v", tc)
			assert.Contains(t, err.Error(), "FLASHGATE_PPROF_ADDR", "%+v", tc)
		}
	}
	c, err := loadServeEnv(map[string]string{})
	require.NoError(t, err)
	assert.Empty(t, c.Serve.PprofAddr, "off by default")
	t.Setenv("FLASHGATE_PPROF_ADDR", "0.0.0.0:6060")
	r := runCLI(t, "", "serve")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "FLASHGATE_PPROF_ADDR")
}

// TestServePprof: with FLASHGATE_PPROF_ADDR set, `flashgate serve` answers
// /debug/pprof/ there, the API address does not, and shutdown closes it.
func TestServePprof(t *testing.T) {
	rs := redistest.Start(t)
	port, pport := redistest.FreePort(t), redistest.FreePort(t)
	t.Setenv("REDIS_URL", "redis://"+rs.Addr+"/0")
	t.Setenv("FLASHGATE_ADDR", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("FLASHGATE_PPROF_ADDR", fmt.Sprintf("127.0.0.1:%d", pport))
	t.Setenv("FLASHGATE_KEYS_FILE", filepath.Join(t.TempDir(), "keys.json"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, strings.NewReader(""), &syncBuffer{}, &stderr) }()
	api, prof := fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", pport)
	get := func(url string) (int, string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	require.Eventually(t, func() bool {
		code, _, err := get(api + "/healthz")
		return err == nil && code == http.StatusOK
	}, time.Minute, 20*time.Millisecond, "serve never became healthy: %s", stderr.String())

	code, body, err := get(prof + "/debug/pprof/")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine")
	code, body, err = get(prof + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine profile:")
	code, _, err = get(api + "/debug/pprof/")
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, code, "the public API does not serve the profiler")
	code, _, err = get(prof + "/healthz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, code, "the profiler's server serves nothing of the API")
	assert.Contains(t, stderr.String(), "pprof profiler listening")

	cancel()
	assert.Equal(t, exitOK, <-done, stderr.String())
	_, _, err = get(prof + "/debug/pprof/")
	assert.Error(t, err, "the profiler's listener is closed at shutdown")
}
