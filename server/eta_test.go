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

// TestEstimateOverHTTP: before the opening time, enter, status and the
// event stream carry opens_at_ms and an estimate that counts down to it
// (validated against openapi.json by e.do); once open, no opens_at_ms, and
// a capacity-bound head reads the time to the earliest expiry, not 0.
func TestEstimateOverHTTP(t *testing.T) {
	clk := testkit.NewClock(testkit.Epoch.Local())
	e := newEnv(t, withClock(clk.Now))
	e.srv.sseInterval = 50 * time.Millisecond
	base := e.listen()
	opens := clk.Now().Add(10 * time.Minute)
	room := e.room(issuer.RoomConfig{Capacity: 1, RatePerMinute: 600, SessionDuration: 2 * time.Minute,
		ArrivalWindow: issuer.ArrivalWindowOff, Opens: opens})
	alice := e.enter(room, "alice")
	require.Equal(t, "WAITING", alice["state"])
	assert.Equal(t, "paused", alice["room_state"])
	assert.EqualValues(t, opens.UnixMilli(), alice["opens_at_ms"])
	assert.EqualValues(t, 10*60_000+100, alice["estimated_wait_ms"], "until the opening, then one step at 600/min")
	tok := alice["waiting_token"].(string)

	clk.Advance(4 * time.Minute)
	r := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "alice", bearer: tok})
	require.Equal(t, 200, r.status, "%s", r.body)
	s := r.json(t)
	assert.EqualValues(t, opens.UnixMilli(), s["opens_at_ms"])
	assert.EqualValues(t, 6*60_000+100, s["estimated_wait_ms"], "counted down")

	res := openStream(t, base+"/v1/rooms/"+room+"/events?waiting_token="+tok, "alice")
	require.Equal(t, 200, res.StatusCode)
	ev, err := readEvent(bufio.NewReader(res.Body))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(ev.data), &m))
	assert.EqualValues(t, opens.UnixMilli(), m["opens_at_ms"], "the event stream carries it too")
	_ = res.Body.Close()

	clk.Advance(6 * time.Minute)
	_, err = e.is.Tick(context.Background(), room)
	require.NoError(t, err)
	bob := e.enter(room, "bob")
	require.Equal(t, "WAITING", bob["state"])
	assert.NotContains(t, bob, "opens_at_ms", "opened")
	assert.EqualValues(t, 100, bob["estimated_wait_ms"], "no history yet: the configured pace, one step at 600/min")
}
