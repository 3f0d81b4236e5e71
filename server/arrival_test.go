package server

import (
	"bufio"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
)

// TestArrivalWindowOverHTTP: an admission not exchanged within the arrival
// window reads EXPIRED with reason not_claimed in status and in the event
// stream (validated against openapi.json by e.do), exchange answers 410
// expired, and the next buyer is admitted at the next tick.
func TestArrivalWindowOverHTTP(t *testing.T) {
	clk := testkit.NewClock(testkit.Epoch.Local())
	e := newEnv(t, withClock(clk.Now))
	e.srv.sseInterval = 50 * time.Millisecond
	base := e.listen()
	room := e.room(issuer.RoomConfig{Capacity: 1, ArrivalWindow: 10 * time.Second})
	alice := e.enter(room, "alice")
	require.Equal(t, "ACTIVE", alice["state"])
	aliceTok := alice["waiting_token"].(string)
	bobTok := e.enter(room, "bob")["waiting_token"].(string)
	status := func(user, tok string) map[string]any {
		r := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: user, bearer: tok})
		require.Equal(t, 200, r.status, "%s", r.body)
		return r.json(t)
	}
	assert.NotContains(t, status("alice", aliceTok), "reason", "no reason while ACTIVE")

	clk.Advance(10 * time.Second)
	for _, when := range []string{"before the tick", "after the tick"} {
		s := status("alice", aliceTok)
		assert.Equal(t, "EXPIRED", s["state"], when)
		assert.Equal(t, "not_claimed", s["reason"], when)
		assert.EqualValues(t, clk.Now().UnixMilli(), s["ended_at_ms"], when)
		e.do(req{method: "POST", path: "/v1/rooms/" + room + "/exchange", user: "alice", bearer: aliceTok}).problem(t, 410, "expired")
		if when == "before the tick" {
			res, err := e.is.Tick(context.Background(), room)
			require.NoError(t, err)
			require.Equal(t, 1, res.NotClaimed)
			require.Equal(t, 1, res.Admitted)
		}
	}
	assert.Equal(t, "ACTIVE", status("bob", bobTok)["state"], "the slot went to the next in line")

	res := openStream(t, base+"/v1/rooms/"+room+"/events?waiting_token="+aliceTok, "alice")
	require.Equal(t, 200, res.StatusCode)
	ev, err := readEvent(bufio.NewReader(res.Body))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(ev.data), &m))
	assert.Equal(t, "EXPIRED", m["state"])
	assert.Equal(t, "not_claimed", m["reason"])

	st := e.admin("GET", "/admin/rooms/"+room+"/stats", "").json(t)
	assert.EqualValues(t, 1, st["not_claimed"])
	assert.EqualValues(t, 1, st["expired"])
}

// TestLeaveByBeacon: navigator.sendBeacon cannot set headers, so the
// page's courtesy leave on pagehide carries the waiting token in the
// waiting_token query parameter (accepted on every waiting-token route, as
// for EventSource) and no body (a body must be JSON: anything else is 415).
func TestLeaveByBeacon(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	e.enter(room, "alice")
	bob := e.enter(room, "bob")
	require.Equal(t, "WAITING", bob["state"])
	tok := bob["waiting_token"].(string)
	r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/leave?waiting_token=" + tok, user: "bob"})
	require.Equal(t, 204, r.status, "%s", r.body)
	r = e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "bob", bearer: tok})
	assert.Equal(t, "NOT_FOUND", r.json(t)["state"])
}
