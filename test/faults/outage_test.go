package faults_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/testing/logtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/server"
)

// failFastBound is the longest an answer may take once Redis is known down
// (docs/operations.md#failure-modes).
const failFastBound = 250 * time.Millisecond

// TestRedisDownFailsFastAndQuietly wires the issuer, its tick loop and the
// HTTP server to a Redis client with the breaker, as flashgate serve does,
// SIGKILLs redis-server under HTTP traffic, and restarts it.
//
// Fast: once the breaker has opened, enter and status answer 503
// unavailable with Retry-After within failFastBound, each (measured one by
// one). Without the breaker every such request ran go-redis's dial and
// retry loops against the dead server: 0.1 s to several seconds, and an
// enter also waited for the batch in flight before it. The breaker closes by
// itself once Redis answers again, and requests succeed.
//
// Quiet: the log says "redis down" once and "redis up" once (and the tick
// loop its own start and end), however many requests fail; the failures
// are counted in /metrics instead. Before, every failed request logged a
// WARN line.
func TestRedisDownFailsFastAndQuietly(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	logs, log := logtest.New()
	breaker := redisconn.Protect(rdb, redisconn.BreakerOptions{Logger: log})
	t.Cleanup(breaker.Close)
	ring := newRing(t)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, WaitingSecret: secret, Logger: log,
		DefaultRoom: &issuer.RoomConfig{Capacity: 2, Tick: 100 * time.Millisecond}})
	require.NoError(t, err)
	base := serve(t, is, ring, "", func(o *server.Options) { o.Logger, o.RedisHealth = log, breaker })
	runTicks(t, is)
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}

	room := redistest.Room("down")
	var waiting answer
	for i := range 3 { // the third waits (capacity 2): its status is an exact script call
		waiting = do(hc, http.MethodPost, base+"/v1/rooms/"+room+"/enter", "pre-"+itoa(int64(i)), "")
		require.Equal(t, http.StatusOK, waiting.status, waiting.String())
	}
	require.Equal(t, "WAITING", waiting.State)
	tr := startTraffic(base, room, 6)
	stopped := false
	defer func() {
		if !stopped {
			tr.halt()
		}
	}()
	eventually(t, 20*time.Second, "traffic before the crash", func() bool { ok, _ := tr.counts(); return ok >= 20 })

	srv.Kill()
	killed := time.Now()
	first := do(hc, http.MethodPost, base+"/v1/rooms/"+room+"/enter", "first-after-kill", "")
	firstTook := time.Since(killed)
	assert.True(t, isUnavailable(first), "%s", first)
	eventually(t, 10*time.Second, "the breaker to open", func() bool { return !breaker.Up() })
	t.Logf("first enter after the kill answered 503 in %s; breaker open %s after the kill",
		firstTook.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	assert.Less(t, firstTook, time.Second, "requests in flight while the breaker opens are cut short")

	var took []time.Duration
	for i := range 40 {
		var a answer
		start := time.Now()
		if i%2 == 0 {
			a = do(hc, http.MethodPost, base+"/v1/rooms/"+room+"/enter", "during-"+itoa(int64(i)), "")
		} else {
			a = do(hc, http.MethodGet, base+"/v1/rooms/"+room+"/status", "pre-2", waiting.WaitingToken)
		}
		took = append(took, time.Since(start))
		require.True(t, isUnavailable(a), "request %d: %s", i, a)
		require.Equal(t, "1", a.retryAfter)
	}
	slices.Sort(took)
	t.Logf("503 after the breaker opened, 40 requests: p50 %s, max %s", took[len(took)/2], took[len(took)-1])
	assert.LessOrEqual(t, took[len(took)-1], failFastBound, "every answer within the fail-fast bound")
	ready := do(hc, http.MethodGet, base+"/readyz", "", "")
	assert.Equal(t, http.StatusServiceUnavailable, ready.status, "readyz: %s", ready)
	eventually(t, 20*time.Second, "the clients' traffic to meet the outage", func() bool {
		_, down := tr.counts()
		return down >= 200
	})

	require.NoError(t, srv.Restart())
	restarted := time.Now()
	var after answer
	eventually(t, 20*time.Second, "enter to work after the restart", func() bool {
		after = do(hc, http.MethodPost, base+"/v1/rooms/"+room+"/enter", "after-restart", "")
		return after.status == http.StatusOK
	})
	t.Logf("enter answered again %s after the restart", time.Since(restarted).Round(time.Millisecond))
	assert.True(t, breaker.Up())
	okBefore, _ := tr.counts()
	eventually(t, 20*time.Second, "the clients' traffic to succeed again", func() bool {
		ok, _ := tr.counts()
		return ok >= okBefore+20
	})
	tr.halt()
	stopped = true

	tr.mu.Lock()
	failed := tr.down
	t.Logf("traffic: %d ok, %d unavailable, %d unknown-room", tr.ok, tr.down, tr.gone)
	assert.Empty(t, tr.bad, "every answer is 200, 503 unavailable (with Retry-After), or 404 unknown-room after the data loss")
	tr.mu.Unlock()

	lines := logs.Lines()
	t.Logf("log lines for %d failed requests: %q", failed+40, lines)
	assert.Zero(t, logs.Count("request failed"), "no line per failed request")
	assert.Equal(t, 1, logs.Count("redis down"))
	assert.Equal(t, 1, logs.Count("redis up"))
	assert.Equal(t, 1, logs.Count("not ready"), "readiness changed once")
	for _, l := range lines {
		_, msg, _ := strings.Cut(l, " ")
		assert.True(t, slices.ContainsFunc([]string{"redis down", "redis up", "tick failed", "tick loop: list rooms",
			"tick loop: ticking again", "not ready", "waiting room restored"}, func(p string) bool { return strings.HasPrefix(msg, p) }),
			"only state changes are logged: %q", l)
	}
	// The restart lost the room, so one restore line joins them (recovery.go).
	assert.LessOrEqual(t, len(lines), 6, "a handful of state changes: %q", lines)

	m := string(do(hc, http.MethodGet, base+"/metrics", "", "").body)
	assert.Contains(t, m, "flashgate_redis_up 1")
	for _, name := range []string{"flashgate_redis_failures_total", "flashgate_redis_rejected_total",
		`flashgate_store_errors_total{code="unavailable"}`} {
		assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(name)+` [1-9]`, m, "counted instead of logged")
	}
}
