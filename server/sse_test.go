package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
