package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// Issue 34 §1's budget: an open event stream costs the issuer at most
// streamBudgetBytes of memory and one goroutine.
const streamBudgetBytes = 8 << 10

// bareConns is the memory of n pairs of connected loopback TCP connections
// held open without a goroutine or buffer: the accepted side of one pair is
// what a server cannot hold a connection for less than (the limit row of
// the budget), the dialled side what each test client costs.
func bareConns(t testing.TB, n int) int64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	before := settledBytes()
	conns := make([]net.Conn, 0, 2*n)
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		a, err := ln.Accept()
		require.NoError(t, err)
		conns = append(conns, c, a)
	}
	after := int64(liveBytes())
	for _, c := range conns {
		_ = c.Close()
	}
	return max(after-before, 0)
}

// settledBytes is liveBytes once it stops moving (two readings 20 ms apart
// within 64 KiB, at most 2 s): run after other tests, the process may still
// be letting go of their goroutines and pools, which would otherwise count
// against (or for) what is measured next.
func settledBytes() int64 {
	last := int64(liveBytes())
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		b := int64(liveBytes())
		if d := b - last; d < 64<<10 && d > -64<<10 {
			return b
		}
		last = b
	}
	return last
}

// TestStreamCost: 1,000 open streams of one room cost the server at most
// 8 KB and one goroutine each (Go heap and stacks after a GC, less the
// clients' own connections). Each client reads its first event and then
// holds only its connection. The streams are opened one at a time, so that
// fasthttp's idle workers (kept up to 10 s) are few.
//
// Before (4dbe417 and up to issue 34 §1): ~40 KB and 3 goroutines a stream
// (fasthttp's connection goroutine and buffers, the body-stream writer and
// its pipe, the peer watch, per-stream timers).
func TestStreamCost(t *testing.T) {
	const n = 1000
	pair := bareConns(t, n)
	client := pair / 2 / n // one side of a bare pair: a test client's connection

	e := newEnv(t)
	e.srv.sseInterval = time.Hour
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	ctx := context.Background()
	toks := make([]string, n)
	for i := range toks {
		en, err := e.is.Enter(ctx, room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
		toks[i] = en.WaitingToken
	}
	// Warm: the room's feed runs, the issuer's workers started.
	warm, _ := rawStream(t, base, room, "u0", toks[0])
	time.Sleep(50 * time.Millisecond)
	before, g0 := settledBytes(), runtime.NumGoroutine()
	addr := strings.TrimPrefix(base, "http://")
	conns := make([]net.Conn, 0, n-1)
	for i := 1; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = fmt.Fprintf(c, "GET /v1/rooms/%s/events?waiting_token=%s HTTP/1.1\r\nHost: x\r\nX-User-ID: u%d\r\n\r\n", room, toks[i], i)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		res, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
		require.NoError(t, err)
		require.Equal(t, 200, res.StatusCode)
		_, err = readEvent(bufio.NewReaderSize(res.Body, 512))
		require.NoError(t, err, "stream %d", i)
	}
	after, g1 := int64(liveBytes()), runtime.NumGoroutine()
	require.Equal(t, float64(n), gaugeValue(e.srv.m.sseOpen))
	held := n - 1
	perStream := (after - before) / int64(held)
	server := perStream - client
	goroutines := float64(g1-g0) / float64(held)
	t.Logf("per open stream: %d B and %.3f goroutines on the server (a bare accepted connection: %d B; a client's, subtracted: %d B)",
		server, goroutines, client, client)
	assert.LessOrEqual(t, server, int64(streamBudgetBytes), "bytes per open stream")
	assert.Greater(t, server, client, "a stream costs at least its connection (the measure measures)")
	// fasthttp keeps a few idle workers: at most 20 over the 999 streams.
	assert.LessOrEqual(t, g1-g0, held+20, "one goroutine per stream")
	// The lower bound from the stacks, not the count: goroutines of earlier
	// tests may end meanwhile.
	buf := make([]byte, 64<<20)
	watching := strings.Count(string(buf[:runtime.Stack(buf, true)]), "server.(*Server).watch(")
	assert.GreaterOrEqual(t, watching, n, "each stream's watch runs")

	for _, c := range conns {
		_ = c.Close()
	}
	_ = warm.Close()
	require.Eventually(t, func() bool { return gaugeValue(e.srv.m.sseOpen) == 0 }, 10*time.Second, 10*time.Millisecond)
}
