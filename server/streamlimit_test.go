package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// dialStream sends an event-stream request over a connection of its own and
// returns it with the response read up to the body: 200 (a stream) or a
// problem answer (whole, in res).
func dialStream(t testing.TB, base, room, user, tok string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second))) // a test fails, not hangs
	_, err = fmt.Fprintf(conn, "GET /v1/rooms/%s/events?waiting_token=%s HTTP/1.1\r\nHost: x\r\nX-User-ID: %s\r\n\r\n", room, tok, user)
	require.NoError(t, err)
	br := bufio.NewReaderSize(conn, 1024)
	res, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	return conn, br, res
}

// openOK opens a stream that must be accepted and reads its first event.
func openOK(t testing.TB, base, room, user, tok string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, _, res := dialStream(t, base, room, user, tok)
	require.Equal(t, 200, res.StatusCode)
	br := bufio.NewReader(res.Body) // chunked
	ev, err := readEvent(br)
	require.NoError(t, err)
	require.Equal(t, "status", ev.event)
	return conn, br
}

// finalEvent reads br to the end of the stream and returns its last event.
func finalEvent(t testing.TB, br *bufio.Reader) sseEvent {
	t.Helper()
	var last sseEvent
	for {
		ev, err := readEvent(br)
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			return last
		}
		last = ev
	}
}

// TestEventsStreamsPerUser: a third stream of one user in one room ends
// the oldest with a final "replaced" event (retry 30 s), the other two stay
// open, another user's streams are not touched, and a stream that ends for
// any reason gives its place back. (Before the limit: every stream was
// accepted and stayed open.)
func TestEventsStreamsPerUser(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.StreamsPerUser = 2 }))
	e.srv.sseInterval = time.Hour
	e.srv.sseHeartbeat = 50 * time.Millisecond
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	bob := e.enter(room, "bob")["waiting_token"].(string)
	carol := e.enter(room, "carol")["waiting_token"].(string)
	replaced := func() float64 { return testutil.ToFloat64(e.srv.m.sseLimits.WithLabelValues(sseReplaced)) }

	_, carol1 := openOK(t, base, room, "carol", carol)
	_, first := openOK(t, base, room, "bob", bob)
	_, second := openOK(t, base, room, "bob", bob)
	assert.Zero(t, replaced())
	_, third := openOK(t, base, room, "bob", bob)

	ev := finalEvent(t, first)
	require.Equal(t, "replaced", ev.event)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(ev.data), &m))
	assert.Equal(t, "replaced", m["reason"])
	assert.EqualValues(t, 2, m["max_streams"])
	assert.Equal(t, 1.0, replaced())
	users, _, _ := e.srv.streams.opened(room, "bob", "")
	assert.Equal(t, 2, users)
	require.Eventually(t, func() bool { return gaugeValue(e.srv.m.sseOpen) == 3 }, 5*time.Second, 5*time.Millisecond)
	for _, br := range []*bufio.Reader{second, third, carol1} { // still open: heartbeats
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, ": hb\n", line)
	}

	// The oldest left is the second; the raw replaced event carries retry.
	conn, _, res := dialStream(t, base, room, "bob", bob)
	require.Equal(t, 200, res.StatusCode)
	body := bufio.NewReader(res.Body)
	_, err := readEvent(body)
	require.NoError(t, err)
	for { // the replaced event: its retry line follows its event line
		line, err := second.ReadString('\n')
		require.NoError(t, err)
		if line == "event: replaced\n" {
			line, err = second.ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "retry: 30000\n", line)
			break
		}
	}
	assert.Equal(t, 2.0, replaced())

	// A stream the client closes gives its place back: the next one
	// replaces nobody.
	users, _, _ = e.srv.streams.opened(room, "bob", "")
	require.Equal(t, 2, users)
	require.NoError(t, conn.Close())
	require.Eventually(t, func() bool { u, _, _ := e.srv.streams.opened(room, "bob", ""); return u == 1 }, 5*time.Second, 5*time.Millisecond)
	openOK(t, base, room, "bob", bob)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 2.0, replaced(), "a place freed by a closed stream is taken without replacing")

	// So does a stream that ends at the MaxStream cap.
	e.srv.sseMax = 50 * time.Millisecond
	_, capped := openOK(t, base, room, "carol", carol) // carol: 2 now, one capped
	assert.Equal(t, "", finalEvent(t, capped).event, "ended by the cap, not replaced")
	require.Eventually(t, func() bool { u, _, _ := e.srv.streams.opened(room, "carol", ""); return u == 1 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, 2.0, replaced())
}

// TestEventsReplacedNoLeak: replacing streams over and over leaves no
// goroutine and no registered place behind: after 40 streams of one user,
// the process holds what two open streams hold.
func TestEventsReplacedNoLeak(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.StreamsPerUser = 2 }))
	e.srv.sseInterval = time.Hour
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	tok := e.enter(room, "bob")["waiting_token"].(string)
	// Counted with one stream open: the issuer starts its workers lazily.
	_, br := openOK(t, base, room, "bob", tok)
	readers := []*bufio.Reader{br}
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	const n = 40
	for range n - 1 {
		_, br := openOK(t, base, room, "bob", tok)
		readers = append(readers, br)
	}
	for _, br := range readers[:n-2] {
		require.Equal(t, "replaced", finalEvent(t, br).event)
	}
	require.Equal(t, float64(n-2), testutil.ToFloat64(e.srv.m.sseLimits.WithLabelValues(sseReplaced)))
	users, _, _ := e.srv.streams.opened(room, "bob", "")
	assert.Equal(t, 2, users)
	require.Eventually(t, func() bool { return gaugeValue(e.srv.m.sseOpen) == 2 }, 5*time.Second, 5*time.Millisecond)
	// An open stream holds one goroutine (its watch); a leak of one per
	// replaced stream would be 38. Slack: fasthttp keeps idle workers for up
	// to 10 s, as many as were busy at once (here three connections).
	const limit = 1 + 5 // one more open stream than at before, and slack
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+limit && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+limit, "goroutines: %d before, after %d replaced streams:\n%s",
		before, n-2, buf[:runtime.Stack(buf, true)])
}

// TestEventsStreamsPerAddress: one client address holds at most
// StreamsPerAddress open streams, of any users; one more is refused 429
// rate_limited with Retry-After, counted, and takes no place; a stream that
// ends gives its place back.
func TestEventsStreamsPerAddress(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.StreamsPerAddress = 3 }))
	e.srv.sseInterval = time.Hour
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	toks := map[string]string{}
	for _, u := range []string{"u0", "u1", "u2", "u3"} {
		toks[u] = e.enter(room, u)["waiting_token"].(string)
	}
	var conns []net.Conn
	for _, u := range []string{"u0", "u1", "u2"} {
		c, _ := openOK(t, base, room, u, toks[u])
		conns = append(conns, c)
	}
	_, _, res := dialStream(t, base, room, "u3", toks["u3"])
	r := readResp(t, res)
	r.problem(t, 429, "rate_limited")
	assert.Equal(t, "30", r.header.Get("Retry-After"))
	assert.Contains(t, string(r.body), "event streams from this client address")
	assert.Equal(t, 1.0, testutil.ToFloat64(e.srv.m.sseLimits.WithLabelValues(sseAddressLimit)))
	_, addr, _ := e.srv.streams.opened(room, "u3", "127.0.0.1")
	assert.Equal(t, 3, addr)

	require.NoError(t, conns[0].Close())
	require.Eventually(t, func() bool { _, a, _ := e.srv.streams.opened(room, "u3", "127.0.0.1"); return a == 2 }, 5*time.Second, 5*time.Millisecond)
	openOK(t, base, room, "u3", toks["u3"])
	assert.Equal(t, 1.0, testutil.ToFloat64(e.srv.m.sseLimits.WithLabelValues(sseAddressLimit)))
}

// TestServerConnLimits: Options.MaxConnsPerIP and Concurrency reach
// fasthttp; MaxConnsPerIP closes a peer's connection beyond the limit.
func TestServerConnLimits(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.MaxConnsPerIP = 2; o.Concurrency = 1000 }))
	assert.Equal(t, 2, e.srv.app.Server().MaxConnsPerIP)
	assert.Equal(t, 1000, e.srv.app.Server().Concurrency)
	e.srv.sseInterval = time.Hour
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	tok := e.enter(room, "bob")["waiting_token"].(string)
	openOK(t, base, room, "bob", tok)
	openOK(t, base, room, "bob", tok)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, _ = fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil) // fasthttp's plain-text 429, then close
	require.NoError(t, err)
	assert.Equal(t, 429, res.StatusCode)
	_ = res.Body.Close()

	e2 := newEnv(t)
	assert.Zero(t, e2.srv.app.Server().MaxConnsPerIP, "no limit by default")
	require.Error(t, Options{MaxConnsPerIP: -1}.Validate())
	require.Error(t, Options{StreamsPerUser: -1}.Validate())
}

// TestEventsMaxStreams: a replica holding Options.MaxStreams open streams
// refuses one more 429 rate_limited with Retry-After (the waiting page then
// polls status), counted as replica_limit, unless it replaces a stream of
// the same user and room; a stream that ends gives its place back, and
// flashgate_sse_streams_limit exports the cap. (Before the cap: every
// stream was accepted, whatever the replica's memory.)
func TestEventsMaxStreams(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.MaxStreams = 2; o.StreamsPerUser = 1 }))
	e.srv.sseInterval = time.Hour
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	toks := map[string]string{}
	for _, u := range []string{"u0", "u1", "u2"} {
		toks[u] = e.enter(room, u)["waiting_token"].(string)
	}
	refused := func() float64 { return testutil.ToFloat64(e.srv.m.sseLimits.WithLabelValues(sseReplicaLimit)) }
	assert.Equal(t, 2.0, testutil.ToFloat64(streamLimitGauge(2)))
	c0, _ := openOK(t, base, room, "u0", toks["u0"])
	_, first := openOK(t, base, room, "u1", toks["u1"])

	_, _, res := dialStream(t, base, room, "u2", toks["u2"])
	r := readResp(t, res)
	r.problem(t, 429, "rate_limited")
	assert.Equal(t, "30", r.header.Get("Retry-After"))
	assert.Contains(t, string(r.body), "this replica holds its most open event streams (2)")
	assert.Equal(t, 1.0, refused())
	_, _, total := e.srv.streams.opened(room, "u2", "")
	assert.Equal(t, 2, total)

	// u1's second stream replaces its first: no new place taken, not refused.
	openOK(t, base, room, "u1", toks["u1"])
	assert.Equal(t, "replaced", finalEvent(t, first).event)
	assert.Equal(t, 1.0, refused())

	require.NoError(t, c0.Close())
	require.Eventually(t, func() bool { _, _, n := e.srv.streams.opened(room, "", ""); return n == 1 }, 5*time.Second, 5*time.Millisecond)
	openOK(t, base, room, "u2", toks["u2"])
	assert.Equal(t, 1.0, refused())
	require.Error(t, Options{MaxStreams: -1}.Validate())
}
