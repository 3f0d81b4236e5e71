package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// TestSmoke: `flashgate smoke` (the chart's helm test) walks a buyer through
// a running serve and passes; with a wrong audience (a token the edge would
// refuse) or a wrong admin token it fails.
func TestSmoke(t *testing.T) {
	rs := redistest.Start(t)
	port := redistest.FreePort(t)
	t.Setenv("REDIS_URL", "redis://"+rs.Addr+"/0")
	t.Setenv("FLASHGATE_ADDR", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("FLASHGATE_KEYS_FILE", filepath.Join(t.TempDir(), "keys.json"))
	t.Setenv("FLASHGATE_ADMIN_TOKEN", "smoke-admin-token-0123456789abcdef")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, strings.NewReader(""), &syncBuffer{}, &stderr) }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	require.Eventually(t, func() bool {
		res, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, time.Minute, 20*time.Millisecond, stderr.String())

	r := runCLI(t, "", "smoke", "-url", base)
	require.Equal(t, exitOK, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "admission token verified against the JWKS")
	r = runCLI(t, "", "smoke", "-url", base, "-audience", "elsewhere")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "does not verify")
	t.Setenv("FLASHGATE_ADMIN_TOKEN", "wrong")
	r = runCLI(t, "", "smoke", "-url", base)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "401")
	cancel()
	<-done
}
