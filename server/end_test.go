package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// TestAdminSoldOut: POST …/sold-out moves every waiting buyer to CLOSED
// (reason sold_out) at once — status, the event stream's final event, the
// waiting page's text — while an admission already made still completes;
// the stats count the drained line.
func TestAdminSoldOut(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	x := e.admitted(room, "alice")
	bob := e.enter(room, "bob")
	require.Equal(t, "WAITING", bob["state"])
	tok := bob["waiting_token"].(string)

	r := e.admin("POST", "/admin/rooms/"+room+"/sold-out", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	var cfg RoomConfig
	require.NoError(t, json.Unmarshal(r.body, &cfg))
	assert.Equal(t, "closed", cfg.State)
	assert.Equal(t, "sold_out", cfg.CloseReason)
	require.NotNil(t, cfg.EndedAt)

	st := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "bob", bearer: tok})
	require.Equal(t, 200, st.status, "%s", st.body)
	m := st.json(t)
	assert.Equal(t, "CLOSED", m["state"])
	assert.Equal(t, "sold_out", m["reason"])
	assert.EqualValues(t, cfg.EndedAt.UnixMilli(), m["ended_at_ms"])
	assert.NotContains(t, m, "position", "a final state has no place in line")
	assert.Empty(t, st.header.Get("Retry-After"), "nothing to poll for")

	ev := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/events", user: "bob", bearer: tok})
	require.Equal(t, 200, ev.status)
	assert.Equal(t, 1, strings.Count(string(ev.body), "event: status"), "one event, and the stream ends")
	assert.Contains(t, string(ev.body), `"state":"CLOSED"`)
	assert.Contains(t, string(ev.body), `"reason":"sold_out"`)

	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/exchange", user: "bob", bearer: tok}).problem(t, 403, "room_closed")
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "carol"}).problem(t, 403, "room_closed")
	c := e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: x.AdmissionToken})
	require.Equal(t, 200, c.status, "an admission made before the sold-out completes: %s", c.body)

	res, err := e.is.Tick(context.Background(), room)
	require.NoError(t, err)
	assert.Equal(t, 1, res.ClosedOut)
	s := e.admin("GET", "/admin/rooms/"+room+"/stats", "")
	require.Equal(t, 200, s.status, "%s", s.body)
	assert.EqualValues(t, 1, s.json(t)["closed_out"])
	assert.EqualValues(t, 2, s.json(t)["closed_seq"])
}

// TestAdminCloseWithReason: POST …/close takes an optional reason; a bad
// one is refused; the reason reaches the entries.
func TestAdminCloseWithReason(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	e.admitted(room, "alice")
	bob := e.enter(room, "bob")
	e.admin("POST", "/admin/rooms/"+room+"/close", `{"reason":"deleted"}`).problem(t, 400, "invalid_input")
	e.admin("POST", "/admin/rooms/"+room+"/close", `{"why":"x"}`).problem(t, 400, "invalid_input")
	r := e.admin("POST", "/admin/rooms/"+room+"/close", `{"reason":"event_ended"}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "event_ended", r.json(t)["close_reason"])
	st := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "bob", bearer: bob["waiting_token"].(string)})
	assert.Equal(t, "event_ended", st.json(t)["reason"])
	r = e.admin("POST", "/admin/rooms/"+room+"/close", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "closed", r.json(t)["close_reason"], "no body: closed")
	r = e.admin("POST", "/admin/rooms/"+room+"/open", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "open", r.json(t)["state"])
	assert.NotContains(t, r.json(t), "ended_at", "reopened")
	st = e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "bob", bearer: bob["waiting_token"].(string)})
	assert.Equal(t, "CLOSED", st.json(t)["state"], "the closed line stays closed after reopening")
}

// TestAdminDeleteRoom: DELETE closes the room (reason deleted) and sets
// every key to expire the retention after; GET answers the deleted room
// (deleted_at) until its keys expire; enter answers 404 unknown_room; the
// listing drops it once drained; a PUT with state open restores it.
func TestAdminDeleteRoom(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1, Retention: 2 * time.Hour})
	e.admitted(room, "alice")
	bob := e.enter(room, "bob")
	r := e.admin("DELETE", "/admin/rooms/"+room, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	m := r.json(t)
	assert.Equal(t, "deleted", m["close_reason"])
	assert.NotEmpty(t, m["deleted_at"])
	assert.EqualValues(t, 7_200_000, m["retention_ms"])
	for _, k := range []string{"config", "waiting", "active", "users", "seq", "stats"} {
		ttl, err := e.rdb.PTTL(context.Background(), roomKey(room, k)).Result()
		require.NoError(t, err)
		assert.InDelta(t, 7_200_000, ttl.Milliseconds(), 10_000, "%s expires with the room's retention", k)
	}
	g := e.admin("GET", "/admin/rooms/"+room, "")
	require.Equal(t, 200, g.status, "%s", g.body)
	assert.NotEmpty(t, g.json(t)["deleted_at"])
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "carol"}).problem(t, 404, "unknown_room")
	st := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "bob", bearer: bob["waiting_token"].(string)})
	assert.Equal(t, "CLOSED", st.json(t)["state"])
	assert.Equal(t, "deleted", st.json(t)["reason"])
	_, err := e.is.Tick(context.Background(), room)
	require.NoError(t, err)
	l := e.admin("GET", "/admin/rooms", "")
	assert.NotContains(t, string(l.body), `"`+room+`"`, "drained: out of the listing")

	p := e.admin("PUT", "/admin/rooms/"+room, `{"state":"open"}`)
	require.Equal(t, 200, p.status, "%s", p.body)
	assert.NotContains(t, p.json(t), "deleted_at", "restored")
	ttl, err := e.rdb.PTTL(context.Background(), roomKey(room, "config")).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ttl, "kept again (no expiry)")
	assert.Equal(t, 200, e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "carol"}).status)
	e.admin("DELETE", "/admin/rooms/nope-"+room, "").problem(t, 404, "unknown_room")
}

// TestPageShowsTheEnd: the waiting page of a sold-out room says "Sold out";
// of a room closed otherwise "This sale has ended"; wait.js shows the same
// for a CLOSED entry and stops following it.
func TestPageShowsTheEnd(t *testing.T) {
	e := pageEnv(t)
	room := e.room(issuer.RoomConfig{})
	_, err := e.is.SoldOut(context.Background(), room)
	require.NoError(t, err)
	r := e.page(room, "", "")
	assert.Equal(t, 403, r.status)
	assert.Equal(t, "closed", dataAttr(t, r.body, "state"))
	assert.Contains(t, string(r.body), "Sold out")
	assert.NotContains(t, string(r.body), `http-equiv="refresh"`, "nothing more to wait for")

	room2 := e.room(issuer.RoomConfig{})
	_, err = e.is.Close(context.Background(), room2, issuer.ReasonEventEnded)
	require.NoError(t, err)
	r = e.page(room2, "", "")
	assert.Contains(t, string(r.body), "This sale has ended")

	js := string(mustRead("page/wait.js"))
	assert.Contains(t, js, `e.state === "CLOSED"`)
	assert.Contains(t, js, `"saleended"`)
}
