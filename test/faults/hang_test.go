package faults_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/server"
)

// TestRedisSIGSTOPAnswersWithinBudget: redis-server is SIGSTOPped under
// HTTP traffic — it keeps accepting connections (the kernel does) and never
// answers, the way a frozen host or a long fork pause looks. Wired as
// flashgate serve wires it (redisconn.Open: go-redis honours context
// deadlines; the breaker; server.Options.RedisTimeout), every request
// answers 503 unavailable with Retry-After within its Redis budget instead
// of waiting out go-redis's read timeout and retries (3 s and more), the
// requests that used their whole budget open the breaker, after which
// answers take microseconds, and everything recovers after SIGCONT.
func TestRedisSIGSTOPAnswersWithinBudget(t *testing.T) {
	const budget = 300 * time.Millisecond
	srv := redistest.Start(t)
	rdb, _, err := redisconn.Open("redis://" + srv.Addr + "/0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	breaker := redisconn.Protect(rdb, redisconn.BreakerOptions{Logger: quiet})
	t.Cleanup(breaker.Close)
	ring := newRing(t)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, WaitingSecret: secret, Logger: quiet,
		DefaultRoom: &issuer.RoomConfig{Capacity: 1, Tick: 100 * time.Millisecond}})
	require.NoError(t, err)
	base := serve(t, is, ring, "", func(o *server.Options) { o.RedisHealth, o.RedisTimeout = breaker, budget })
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}

	room := redistest.Room("hang")
	var waiting answer
	for i := range 2 {
		waiting = do(hc, http.MethodPost, base+"/v1/rooms/"+room+"/enter", "pre-"+strconv.Itoa(i), "")
		require.Equal(t, http.StatusOK, waiting.status, waiting.String())
	}
	require.Equal(t, "WAITING", waiting.State)

	pid, err := rdb.InfoMap(context.Background(), "server").Result()
	require.NoError(t, err)
	p, err := strconv.Atoi(pid["Server"]["process_id"])
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(p, syscall.SIGSTOP))
	stopped := true
	cont := func() {
		if stopped {
			require.NoError(t, syscall.Kill(p, syscall.SIGCONT))
			stopped = false
		}
	}
	t.Cleanup(cont)

	// A burst of enters and polls from 6 clients: each answers 503 with
	// Retry-After within the budget (plus scheduling slack), none waits for
	// go-redis's read timeout.
	var mu sync.Mutex
	var slowest time.Duration
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				start := time.Now()
				var a answer
				if i%2 == 0 {
					a = do(hc, http.MethodPost, base+"/v1/rooms/"+room+"/enter", "u"+strconv.Itoa(c*10+i), "")
				} else {
					a = do(hc, http.MethodGet, base+"/v1/rooms/"+room+"/status", "pre-1", waiting.WaitingToken)
				}
				took := time.Since(start)
				assert.Equal(t, http.StatusServiceUnavailable, a.status, a.String())
				assert.Equal(t, "1", a.retryAfter)
				mu.Lock()
				slowest = max(slowest, took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("24 requests against a stopped Redis: slowest answer %s (budget %s)", slowest, budget)
	assert.Less(t, slowest, budget+time.Second, "every answer within the budget, not go-redis's 3 s read timeout")
	eventually(t, 5*time.Second, "requests that used their whole budget open the breaker", func() bool { return !breaker.Up() })

	start := time.Now()
	a := do(hc, http.MethodGet, base+"/v1/rooms/"+room+"/status", "pre-1", waiting.WaitingToken)
	assert.Equal(t, http.StatusServiceUnavailable, a.status, a.String())
	assert.Less(t, time.Since(start), failFastBound, "with the breaker open: at once")

	cont()
	eventually(t, 10*time.Second, "recovers after SIGCONT", func() bool {
		a := do(hc, http.MethodGet, base+"/v1/rooms/"+room+"/status", "pre-1", waiting.WaitingToken)
		return a.status == http.StatusOK && a.State == "WAITING"
	})
}
