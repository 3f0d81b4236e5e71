package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

func httpPost(url, ctype, body string) (*http.Response, error) {
	return http.Post(url, ctype, strings.NewReader(body))
}

func readResp(t testing.TB, res *http.Response) resp {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

type sseEvent struct {
	event string
	data  string
}

// readEvent reads one SSE event; io.EOF when the stream ended.
func readEvent(br *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.event != "" || ev.data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, "event: "):
			ev.event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data += line[len("data: "):]
		}
	}
}

func openStream(t *testing.T, url, user string) *http.Response {
	t.Helper()
	hr, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	hr.Header.Set("X-User-ID", user)
	res, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

func TestEventsStream(t *testing.T) {
	e := newEnv(t)
	e.srv.sseInterval = 100 * time.Millisecond
	base := e.listen()
	room := e.room(issuer.RoomConfig{Capacity: 1})
	alice := e.enter(room, "alice")["waiting_token"].(string)
	bob := e.enter(room, "bob")["waiting_token"].(string)

	res := openStream(t, base+"/v1/rooms/"+room+"/events?waiting_token="+bob, "bob")
	require.Equal(t, 200, res.StatusCode)
	assert.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	br := bufio.NewReader(res.Body)
	ev, err := readEvent(br)
	require.NoError(t, err)
	assert.Equal(t, "status", ev.event)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(ev.data), &m))
	assert.Equal(t, "WAITING", m["state"])
	assert.EqualValues(t, 1, m["position"])
	assert.Equal(t, 1.0, gaugeValue(e.srv.m.sseOpen))

	// Free the capacity and run a tick: bob is admitted, the stream sends
	// ACTIVE and ends.
	r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/leave", user: "alice", bearer: alice})
	require.Equal(t, 204, r.status)
	tr, err := e.is.Tick(context.Background(), room)
	require.NoError(t, err)
	require.Equal(t, 1, tr.Admitted)
	var last map[string]any
	for {
		ev, err := readEvent(br)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.Equal(t, "status", ev.event)
		require.NoError(t, json.Unmarshal([]byte(ev.data), &last))
	}
	require.NotNil(t, last)
	assert.Equal(t, "ACTIVE", last["state"])
	assert.NotEmpty(t, last["admission_id"])
	require.Eventually(t, func() bool { return gaugeValue(e.srv.m.sseOpen) == 0 }, 5*time.Second, 10*time.Millisecond)

	// Errors before the stream starts are ordinary problems.
	res = openStream(t, base+"/v1/rooms/"+room+"/events?waiting_token=junk", "bob")
	readResp(t, res).problem(t, 401, "invalid_waiting_token")
	res = openStream(t, base+"/v1/rooms/"+room+"/events?waiting_token="+bob, "carol")
	readResp(t, res).problem(t, 403, "token_owner_mismatch")
}

func TestEventsEndOnShutdownAndCap(t *testing.T) {
	e := newEnv(t)
	e.srv.sseMax = 300 * time.Millisecond
	e.srv.sseInterval = 50 * time.Millisecond
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	bob := e.enter(room, "bob")["waiting_token"].(string)

	// The cap ends a stream that never leaves WAITING.
	res := openStream(t, base+"/v1/rooms/"+room+"/events?waiting_token="+bob, "bob")
	br := bufio.NewReader(res.Body)
	n := 0
	for {
		ev, err := readEvent(br)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(ev.data), &m))
		assert.Equal(t, "WAITING", m["state"])
		assert.EqualValues(t, -1, m["estimated_wait_ms"]) // paused: unknown
		n++
	}
	assert.GreaterOrEqual(t, n, 1)

	// Shutdown ends an open stream instead of waiting for it.
	e.srv.sseMax = time.Hour
	res = openStream(t, base+"/v1/rooms/"+room+"/events?waiting_token="+bob, "bob")
	br = bufio.NewReader(res.Body)
	_, err := readEvent(br)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, e.srv.Shutdown(ctx))
	for {
		if _, err := readEvent(br); err != nil {
			break
		}
	}
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		panic(err)
	}
	return m.GetGauge().GetValue()
}

// rawStream opens an event stream over a connection of its own (no client
// pooling), so a test can close exactly that connection.
func rawStream(t testing.TB, base, room, user, tok string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "GET /v1/rooms/%s/events?waiting_token=%s HTTP/1.1\r\nHost: x\r\nX-User-ID: %s\r\n\r\n", room, tok, user)
	require.NoError(t, err)
	br := bufio.NewReaderSize(conn, 1024)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "HTTP/1.1 200"), line)
	for { // headers
		line, err = br.ReadString('\n')
		require.NoError(t, err)
		if line == "\r\n" {
			break
		}
	}
	return conn, br
}

func TestEventsHeartbeat(t *testing.T) {
	e := newEnv(t)
	e.srv.sseInterval = time.Hour // no second status event
	e.srv.sseHeartbeat = 50 * time.Millisecond
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	bob := e.enter(room, "bob")["waiting_token"].(string)
	conn, br := rawStream(t, base, room, "bob", bob)
	defer conn.Close()
	ev, err := readEvent(br)
	require.NoError(t, err)
	require.Equal(t, "status", ev.event)
	hb := 0
	for hb < 3 {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if line == ": hb\n" {
			hb++
		}
		require.NotContains(t, line, "event:", "only heartbeats on an idle stream")
	}
}

// TestEventsClientGone: clients that close their connections are noticed
// within one heartbeat, and the open-streams gauge returns exactly to where
// it was.
func TestEventsClientGone(t *testing.T) {
	const n = 20
	hb := 200 * time.Millisecond
	e := newEnv(t)
	e.srv.sseInterval = time.Hour
	e.srv.sseHeartbeat = hb
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	before := gaugeValue(e.srv.m.sseOpen)
	var conns []net.Conn
	for i := range n {
		u := fmt.Sprintf("u%d", i)
		tok := e.enter(room, u)["waiting_token"].(string)
		conn, br := rawStream(t, base, room, u, tok)
		_, err := readEvent(br)
		require.NoError(t, err)
		conns = append(conns, conn)
	}
	require.Equal(t, before+n, gaugeValue(e.srv.m.sseOpen))
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	require.Eventually(t, func() bool { return gaugeValue(e.srv.m.sseOpen) == before }, hb, 5*time.Millisecond)
	time.Sleep(hb + hb/2) // and it stays there: nothing decremented twice
	assert.Equal(t, before, gaugeValue(e.srv.m.sseOpen))
}

// TestEventsHeartbeatWriteFails: where the close cannot be seen (a
// half-open peer that never sends FIN), the heartbeat's failed write ends
// the stream: the first write after the close draws the peer's reset, the
// next one fails.
func TestEventsHeartbeatWriteFails(t *testing.T) {
	hb := 100 * time.Millisecond
	e := newEnv(t)
	e.srv.sseInterval = time.Hour
	e.srv.sseHeartbeat = hb
	e.srv.sseNoWatch = true
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	before := gaugeValue(e.srv.m.sseOpen)
	tok := e.enter(room, "bob")["waiting_token"].(string)
	conn, br := rawStream(t, base, room, "bob", tok)
	_, err := readEvent(br)
	require.NoError(t, err)
	time.Sleep(2 * hb)
	require.Equal(t, before+1, gaugeValue(e.srv.m.sseOpen), "the heartbeat alone does not end a live stream")
	require.NoError(t, conn.Close())
	require.Eventually(t, func() bool { return gaugeValue(e.srv.m.sseOpen) == before }, 5*hb, 5*time.Millisecond)
}

// cmdCounter counts the Redis commands a client sends (go-redis hook).
type cmdCounter struct{ n atomic.Int64 }

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// TestEventsRedisPerRoom: with the status snapshot on (an opt-in for very
// large lines), the streams of users far behind the head cost Redis one
// snapshot call per room per snapshot interval, not one call per stream and
// poll — 200 streams cost what 20 do. Only users near the head (a bounded
// band, issuer/snapshot.go) get the exact script at every poll.
func TestEventsRedisPerRoom(t *testing.T) {
	rdb := redistest.Client(t)
	cnt := &cmdCounter{}
	rdb.AddHook(cnt)
	e := newEnv(t, withRedis(rdb), withIssuer(func(c *issuer.Config) { c.StatusSnapshot = issuer.SuggestedStatusSnapshot }))
	e.srv.sseInterval = 50 * time.Millisecond // every stream polls 20 times a second
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	const far = 100 // first position past the exact band (nearHead is 60 here)
	toks := make([]string, far+200)
	for i := range toks {
		en, err := e.is.Enter(context.Background(), room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
		toks[i] = en.WaitingToken
	}
	const window = time.Second
	measure := func(from, to int) int64 {
		var conns []net.Conn
		for i := from; i < to; i++ {
			conn, br := rawStream(t, base, room, fmt.Sprintf("u%d", i), toks[i])
			ev, err := readEvent(br)
			require.NoError(t, err)
			require.Contains(t, ev.data, `"position_estimated":true`)
			conns = append(conns, conn)
		}
		time.Sleep(100 * time.Millisecond)
		n0 := cnt.n.Load()
		time.Sleep(window)
		n := cnt.n.Load() - n0
		for _, c := range conns {
			_ = c.Close()
		}
		require.Eventually(t, func() bool { return gaugeValue(e.srv.m.sseOpen) == 0 }, 2*time.Second, 5*time.Millisecond)
		return n
	}
	few := measure(far, far+20)
	many := measure(far, far+200)
	t.Logf("Redis commands in %v: 20 streams %d, 200 streams %d (polls: %d and %d)", window, few, many, 20*20, 200*20)
	// One snapshot call per 500 ms: about 2 per second either way.
	assert.GreaterOrEqual(t, few, int64(1), "the hook counts the snapshot calls")
	assert.LessOrEqual(t, few, int64(4))
	assert.LessOrEqual(t, many, few+2)
}

// TestEventsStalledReader: a client that stops reading its stream (an
// attacker holding streams open without reading, or a dead peer the
// kernel still acknowledges) is ended once its socket buffers are full —
// a write waits at most streamWriteTimeout — and the room's other streams
// keep their events meanwhile. The stalled client's receive buffer is
// made small and each event large (a 500-byte page_message of characters
// JSON escapes) so that the buffers fill within a second or two.
func TestEventsStalledReader(t *testing.T) {
	e := newEnv(t)
	e.srv.sseInterval = 5 * time.Millisecond
	e.srv.sseHeartbeat = time.Hour
	base := e.listen()
	room := e.room(issuer.RoomConfig{State: issuer.RoomPaused, PageMessage: strings.Repeat("<", issuer.MaxPageMessage)})
	stalledTok := e.enter(room, "stalled")["waiting_token"].(string)
	healthyTok := e.enter(room, "healthy")["waiting_token"].(string)

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		if err != nil {
			return err
		}
		return serr
	}}
	stalled, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer stalled.Close()
	_, err = fmt.Fprintf(stalled, "GET /v1/rooms/%s/events?waiting_token=%s HTTP/1.1\r\nHost: x\r\nX-User-ID: stalled\r\n\r\n", room, stalledTok)
	require.NoError(t, err)
	// The stalled client reads nothing at all.

	conn, br := rawStream(t, base, room, "healthy", healthyTok)
	defer conn.Close()
	require.Eventually(t, func() bool { return gaugeValue(e.srv.m.sseOpen) == 2 }, 5*time.Second, 5*time.Millisecond)
	var events atomic.Int64
	go func() {
		for {
			if _, err := readEvent(br); err != nil {
				return
			}
			events.Add(1)
		}
	}()
	require.Eventually(t, func() bool { return gaugeValue(e.srv.m.sseOpen) == 1 }, 20*time.Second, 10*time.Millisecond,
		"the stream of the client that does not read ends")
	n := events.Load()
	require.Eventually(t, func() bool { return events.Load() >= n+20 }, 10*time.Second, 5*time.Millisecond,
		"the healthy stream keeps getting its events")
	assert.Equal(t, 1.0, gaugeValue(e.srv.m.sseOpen), "only the stalled stream ended")
}

// TestEventsFinalFirstEventFraming: a stream whose first event is final
// (here an admitted user's) is that event and the body's end, exactly: one
// last chunk, nothing after it (it was written twice once).
func TestEventsFinalFirstEventFraming(t *testing.T) {
	e := newEnv(t)
	base := e.listen()
	room := e.room(issuer.RoomConfig{Capacity: 1})
	tok := e.enter(room, "alice")["waiting_token"].(string) // admitted at once
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = fmt.Fprintf(conn, "GET /v1/rooms/%s/events?waiting_token=%s HTTP/1.1\r\nHost: x\r\nX-User-ID: alice\r\n\r\n", room, tok)
	require.NoError(t, err)
	raw, err := io.ReadAll(conn)
	require.NoError(t, err)
	body := string(raw)
	require.Contains(t, body, "Transfer-Encoding: chunked")
	require.Contains(t, body, `"state":"ACTIVE"`)
	assert.True(t, strings.HasSuffix(body, "\n\n\r\n0\r\n\r\n"), "the event's chunk, then the last chunk, then nothing: %q", body[max(0, len(body)-40):])
	assert.Equal(t, 1, strings.Count(body, "\r\n0\r\n\r\n"), "one last chunk")
}

// streamEvent is the status event's value that appendStatusEvent writes
// without reflection: the reference its bytes are held to.
func streamEvent(e *issuer.Entry, n *issuer.RoomNews) any {
	if n == nil {
		return entryJSON(e)
	}
	msg := n.PageMessage
	return streamEntry{Entry: entryJSON(e), PageMessage: &msg}
}

// TestAppendStatusEvent: the stream's status event is encoding/json's
// bytes of streamEntry, for entries of every state and page messages that
// JSON escapes.
func TestAppendStatusEvent(t *testing.T) {
	at := time.Now()
	entries := []*issuer.Entry{
		{Room: "r", User: "u", State: "WAITING", Arrival: 42, Position: 17, Ahead: 16, TotalWaiting: 300,
			EstimatedWait: 90 * time.Second, PollAfter: 7 * time.Second, PositionEstimated: true, WaitingToken: "fgw2_x",
			RoomState: issuer.RoomOpen, Lane: "public"},
		{Room: "r", State: "WAITING", PreQueue: true, EstimatedWait: -1, PollAfter: time.Second, RoomState: issuer.RoomPaused,
			OpensAt: at.Add(time.Hour), LotteryCommitment: "abc"},
		{Room: "r", State: "ACTIVE", AdmissionID: "adm", AdmissionNumber: 3, AdmittedAt: at, ExpiresAt: at.Add(time.Minute)},
		{Room: "r", State: "CLOSED", Reason: "sold_out", EndedAt: at, RoomState: issuer.RoomClosed},
	}
	msgs := []*issuer.RoomNews{nil, {PageMessage: ""}, {PageMessage: "back at <noon> & \u2028 \"soon\" \xff é"}}
	for i, e := range entries {
		for j, n := range msgs {
			for _, retry := range []time.Duration{0, 7 * time.Second} {
				want := appendEvent(nil, "status", streamEvent(e, n), retry)
				got := appendStatusEvent(nil, e, n, retry)
				assert.Equal(t, string(want), string(got), "entry %d, news %d, retry %v", i, j, retry)
			}
		}
	}
}

// BenchmarkStatusEvent: a stream's status event by appendStatusEvent and,
// in the same run, by encoding/json (appendEvent of streamEvent: how it was
// written before).
func BenchmarkStatusEvent(b *testing.B) {
	e := &issuer.Entry{Room: "sku-1", User: "u", State: "WAITING", Arrival: 123456, Position: 120000, Ahead: 119999,
		TotalWaiting: 985000, EstimatedWait: 40 * time.Minute, PollAfter: 30 * time.Second, PositionEstimated: true,
		WaitingToken: "fgw2_Xy3z_hoeiiktxjt_123456_abcdefghijklmnop", RoomState: issuer.RoomOpen, Lane: "public"}
	n := &issuer.RoomNews{PageMessage: "Restock at noon: stay on this page."}
	var buf []byte
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			buf = appendStatusEvent(buf[:0], e, n, 30*time.Second)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			buf = appendEvent(buf[:0], "status", streamEvent(e, n), 30*time.Second)
		}
	})
}
