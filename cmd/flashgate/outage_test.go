package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// TestServeRedisOutage checks serve's wiring of the Redis breaker: with
// Redis killed, enter answers 503 at once and /metrics says
// flashgate_redis_up 0; the log says "redis down" once, however many
// requests fail, and "redis up" once Redis is back. With
// FLASHGATE_LOG_FORMAT=json at debug level every line written meanwhile —
// go-redis's own (routed through slog at DEBUG), the access log's, the
// breaker's — parses as one JSON object.
func TestServeRedisOutage(t *testing.T) {
	rs := redistest.Start(t)
	port := redistest.FreePort(t)
	t.Setenv("REDIS_URL", "redis://"+rs.Addr+"/0")
	t.Setenv("FLASHGATE_ADDR", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("FLASHGATE_KEYS_FILE", filepath.Join(t.TempDir(), "keys.json"))
	t.Setenv("FLASHGATE_DEFAULT_ROOM", "open")
	t.Setenv("FLASHGATE_ENTER_PER_USER", "0")
	t.Setenv("FLASHGATE_LOG_FORMAT", "json")
	t.Setenv("FLASHGATE_LOG_LEVEL", "debug")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, strings.NewReader(""), &syncBuffer{}, &stderr) }()

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	get := func(path, user string) (int, string) {
		method := http.MethodGet
		if strings.HasSuffix(path, "/enter") {
			method = http.MethodPost
		}
		req, _ := http.NewRequest(method, base+path, nil)
		req.Header.Set("X-User-ID", user)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	require.Eventually(t, func() bool { s, _ := get("/readyz", ""); return s == http.StatusOK },
		time.Minute, 20*time.Millisecond, "serve never became ready: %s", stderr.String())
	s, body := get("/v1/rooms/launch/enter", "alice")
	require.Equal(t, http.StatusOK, s, body)

	rs.Kill()
	require.Eventually(t, func() bool {
		_, m := get("/metrics", "")
		return strings.Contains(m, "flashgate_redis_up 0")
	}, 10*time.Second, 20*time.Millisecond, "the breaker never opened")
	for i := range 50 {
		start := time.Now()
		s, body := get("/v1/rooms/launch/enter", fmt.Sprintf("u%d", i))
		require.Equal(t, http.StatusServiceUnavailable, s, body)
		require.Less(t, time.Since(start), 250*time.Millisecond)
	}
	// go-redis logs its failed dials (the breaker's probes) itself.
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), `"msg":"go-redis:`) },
		20*time.Second, 50*time.Millisecond, "go-redis never logged during the outage")

	require.NoError(t, rs.Restart())
	require.Eventually(t, func() bool { s, _ := get("/v1/rooms/launch/enter", "bob"); return s == http.StatusOK },
		10*time.Second, 20*time.Millisecond, "enter never worked again")
	cancel()
	require.Equal(t, exitOK, <-done, stderr.String())
	logs := stderr.String()
	assert.Equal(t, 1, strings.Count(logs, `"msg":"redis down`), logs)
	assert.Equal(t, 1, strings.Count(logs, `"msg":"redis up"`), logs)
	assert.NotContains(t, logs, "request failed")
	goRedis := 0
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec map[string]any
		if !assert.NoError(t, json.Unmarshal([]byte(line), &rec), "not a JSON line: %q", line) {
			continue
		}
		if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, "go-redis:") {
			goRedis++
			assert.Equal(t, "DEBUG", rec["level"], "go-redis's own lines are debug: %q", line)
		}
	}
	assert.Positive(t, goRedis, "no go-redis line during the outage: the test shows nothing\n%s", logs)
	assert.Positive(t, strings.Count(logs, `"msg":"request"`), "the access log is on by default")
}

// TestServeWaitsForRedis: serve started while Redis is away (a failover, a
// Redis starting after the pods) waits for it with backoff, logging each
// attempt, and serves once it answers; cancelled while waiting it exits 0;
// FLASHGATE_REDIS_WAIT bounds the wait (exit 1). (Before: one 5 s ping,
// then exit 1, so pods crash-looped through a Redis failover.)
func TestServeWaitsForRedis(t *testing.T) {
	rs := redistest.Start(t)
	rs.Kill()
	port := redistest.FreePort(t)
	t.Setenv("REDIS_URL", "redis://"+rs.Addr+"/0")
	t.Setenv("FLASHGATE_ADDR", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("FLASHGATE_KEYS_FILE", filepath.Join(t.TempDir(), "keys.json"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, strings.NewReader(""), &syncBuffer{}, &stderr) }()
	require.Eventually(t, func() bool { return strings.Count(stderr.String(), "waiting for Redis") >= 3 },
		30*time.Second, 20*time.Millisecond, "serve does not wait: %s", stderr.String())
	select {
	case code := <-done:
		t.Fatalf("serve exited %d while Redis was away:\n%s", code, stderr.String())
	default:
	}
	require.NoError(t, rs.Restart())
	require.Eventually(t, func() bool {
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "serve never became ready: %s", stderr.String())
	assert.Contains(t, stderr.String(), "redis answers")
	cancel()
	require.Equal(t, exitOK, <-done, stderr.String())

	// Cancelled (SIGTERM) while waiting: exit 0, nothing to drain.
	rs.Kill()
	ctx2, cancel2 := context.WithCancel(context.Background())
	var stderr2 syncBuffer
	go func() { done <- run(ctx2, []string{"serve"}, strings.NewReader(""), &syncBuffer{}, &stderr2) }()
	require.Eventually(t, func() bool { return strings.Contains(stderr2.String(), "waiting for Redis") },
		30*time.Second, 20*time.Millisecond, stderr2.String())
	cancel2()
	require.Equal(t, exitOK, <-done, stderr2.String())

	// A bounded wait gives up.
	t.Setenv("FLASHGATE_REDIS_WAIT", "1s")
	var stderr3 syncBuffer
	require.Equal(t, exitFailure, run(context.Background(), []string{"serve"}, strings.NewReader(""), &syncBuffer{}, &stderr3))
	assert.Contains(t, stderr3.String(), "redis does not answer after 1s")
}
