package redisconn_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/testing/logtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// silent drops go-redis's internal log lines (dial retries against the
// servers these tests kill on purpose).
type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(silent{})
	os.Exit(m.Run())
}

// protect installs a breaker on rdb, logging to a records handler, closed
// at cleanup.
func protect(t *testing.T, rdb redis.UniversalClient) (*redisconn.Breaker, *logtest.Recorder) {
	logs, log := logtest.New()
	b := redisconn.Protect(rdb, redisconn.BreakerOptions{Logger: log})
	t.Cleanup(b.Close)
	return b, logs
}

// timed runs f and returns its error and duration.
func timed(f func() error) (error, time.Duration) {
	start := time.Now()
	err := f()
	return err, time.Since(start)
}

// TestBreakerKilledAndRestarted: redis-server SIGKILLed. The breaker opens
// by itself, then every command fails at once with ErrDown; it closes by
// itself once Redis is back, with one log line each way.
//
// Without it (today's client), every command against the dead server runs
// go-redis's dial loop (5 attempts, 100 ms apart) inside its retry loop (3
// retries): 0.1 to several seconds each (TestBreakerClosedPort measures it).
func TestBreakerKilledAndRestarted(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	b, logs := protect(t, rdb)
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	require.True(t, b.Up())

	srv.Kill()
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for !errors.Is(err, redisconn.ErrDown) {
		require.True(t, time.Now().Before(deadline), "the breaker never opened: %v", err)
		err = rdb.Get(ctx, "k").Err()
		require.Error(t, err)
	}
	assert.False(t, b.Up())
	assert.Positive(t, b.Failures())
	assert.Contains(t, err.Error(), "connect", "ErrDown carries the cause")

	var slowest time.Duration
	for range 50 {
		err, d := timed(func() error { return rdb.Get(ctx, "k").Err() })
		assert.ErrorIs(t, err, redisconn.ErrDown)
		slowest = max(slowest, d)
	}
	assert.Less(t, slowest, 10*time.Millisecond, "while open, commands fail without trying")
	assert.GreaterOrEqual(t, b.Rejected(), uint64(50))
	// Pipelines and scripts too.
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error { p.Get(ctx, "k"); p.Incr(ctx, "n"); return nil })
	assert.ErrorIs(t, err, redisconn.ErrDown)
	assert.ErrorIs(t, redis.NewScript("return 1").Run(ctx, rdb, nil).Err(), redisconn.ErrDown)

	require.NoError(t, srv.Restart())
	deadline = time.Now().Add(10 * time.Second)
	for rdb.Set(ctx, "k", "again", 0).Err() != nil {
		require.True(t, time.Now().Before(deadline), "the breaker never closed")
		time.Sleep(20 * time.Millisecond)
	}
	assert.True(t, b.Up())
	assert.Equal(t, []string{"WARN redis down: commands fail fast until a probe answers", "INFO redis up"}, logs.Lines())
}

// TestBreakerClosedPort: nothing listens. The first command is cut short
// when the breaker opens during its own dial loop (3 refused dials), instead
// of running go-redis's loops to the end; the next ones fail at once. The
// same client without the breaker is measured for comparison.
func TestBreakerClosedPort(t *testing.T) {
	ctx := context.Background()
	addr := closedPort(t)
	bare := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = bare.Close() })
	err, withoutBreaker := timed(func() error { return bare.Ping(ctx).Err() })
	require.Error(t, err)
	t.Logf("first command without a breaker: %s (%v)", withoutBreaker, err)

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	b, logs := protect(t, rdb)
	err, first := timed(func() error { return rdb.Ping(ctx).Err() })
	assert.ErrorIs(t, err, redisconn.ErrDown)
	assert.Less(t, first, time.Second, "the opening breaker ends the first command's dial and retry loops")
	t.Logf("first command with the breaker: %s", first)
	err, next := timed(func() error { return rdb.Ping(ctx).Err() })
	assert.ErrorIs(t, err, redisconn.ErrDown)
	assert.Less(t, next, 10*time.Millisecond)
	assert.False(t, b.Up())
	assert.Equal(t, []string{"WARN redis down: commands fail fast until a probe answers"}, logs.Lines())
}

// TestBreakerIgnoresRedisErrors: errors Redis answers with — WRONGTYPE,
// NOSCRIPT, a script error, OOM, NOPERM — are answers: Redis is up, and the breaker
// stays closed however many there are.
func TestBreakerIgnoresRedisErrors(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t) // CONFIG SET: never on a shared server
	b, logs := protect(t, rdb)
	require.NoError(t, rdb.Set(ctx, "s", "v", 0).Err())
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())
	t.Cleanup(func() { _ = rdb.ConfigSet(ctx, "maxmemory", "0").Err() })
	for range 10 {
		assert.ErrorContains(t, rdb.HGet(ctx, "s", "f").Err(), "WRONGTYPE")
		assert.ErrorContains(t, rdb.EvalSha(ctx, strings.Repeat("0", 40), nil).Err(), "NOSCRIPT")
		assert.ErrorContains(t, rdb.Eval(ctx, "return redis.call('NOPE')", nil).Err(), "Unknown Redis command")
		assert.ErrorContains(t, rdb.Set(ctx, "t", "v", 0).Err(), "OOM")
		assert.ErrorContains(t, rdb.Do(ctx, "ACL", "NOPE").Err(), "ERR")
	}
	assert.True(t, b.Up())
	assert.Zero(t, b.Failures())
	assert.Empty(t, logs.Lines())
	assert.Equal(t, "v", rdb.Get(ctx, "s").Val())
}

// TestBreakerCallerGivesUp: commands whose caller's context ends are the
// caller's business: however many, they do not open the breaker.
func TestBreakerCallerGivesUp(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	b, _ := protect(t, rdb)
	for range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		assert.Error(t, rdb.Get(ctx, "k").Err())
		// A 30 ms script outlives the caller's 5 ms deadline.
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Millisecond)
		assert.Error(t, rdb.Eval(ctx, busy30ms, nil).Err())
		cancel()
	}
	assert.True(t, b.Up())
	assert.NoError(t, rdb.Ping(context.Background()).Err())
}

const busy30ms = `local t = redis.call('TIME')
local stop = t[1] * 1000000 + t[2] + 30000
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= stop
return 1`

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestBreakerClusterPerNode: on a Cluster each node has its own breaker. A
// dead master opens its own, and the rooms of the other masters are not
// failed fast: their commands still reach Redis.
func TestBreakerClusterPerNode(t *testing.T) {
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3)
	addrs := make([]string, len(cl.Nodes))
	for i, s := range cl.Nodes {
		addrs[i] = s.Addr
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	b, logs := protect(t, rdb) // before the first command: node clients are made on demand

	// One key on the node to kill, one on another.
	var dead, alive string
	for i := 0; dead == "" || alive == ""; i++ {
		k := "k" + strconv.Itoa(i)
		m, err := rdb.MasterForKey(ctx, k)
		require.NoError(t, err)
		switch {
		case m.Options().Addr == cl.Nodes[0].Addr && dead == "":
			dead = k
		case m.Options().Addr != cl.Nodes[0].Addr && alive == "":
			alive = k
		}
	}
	require.NoError(t, rdb.Set(ctx, dead, "1", 0).Err())
	require.NoError(t, rdb.Set(ctx, alive, "1", 0).Err())

	cl.Nodes[0].Kill()
	deadline := time.Now().Add(10 * time.Second)
	for err := error(nil); !errors.Is(err, redisconn.ErrDown); err = rdb.Get(ctx, dead).Err() {
		require.True(t, time.Now().Before(deadline), "the dead node's breaker never opened: %v", err)
	}
	assert.False(t, b.Up())
	for range 20 {
		// The live master answers: the value, or CLUSTERDOWN once the
		// cluster has noticed the dead one (no replicas) — never ErrDown.
		err := rdb.Get(ctx, alive).Err()
		assert.NotErrorIs(t, err, redisconn.ErrDown)
	}
	assert.Equal(t, []string{"WARN redis down: commands fail fast until a probe answers"}, logs.Lines())
}
