package server

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

func (e *env) invites(room, body string) []InviteJSON {
	e.t.Helper()
	r := e.admin("POST", "/admin/rooms/"+room+"/invites", body)
	require.Equal(e.t, 200, r.status, "%s", r.body)
	var out InvitesResponse
	require.NoError(e.t, json.Unmarshal(r.body, &out))
	return out.Invites
}

func (e *env) enterWith(room, user, invite string) resp {
	e.t.Helper()
	b, _ := json.Marshal(map[string]string{"invite": invite})
	return e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: user, body: string(b)})
}

// TestAdminInvitesAndEnterWithInvite: the admin API signs invites; enter
// with {"invite": …} puts the user in the priority lane ahead of the
// public line; the lane shows in the entry and the stats.
func TestAdminInvitesAndEnterWithInvite(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
	pub := e.enter(room, "alice")
	assert.Equal(t, "public", pub["lane"])

	inv := e.invites(room, `{"lane":"priority","user":"vip","ttl_ms":3600000,"single_use":true,"count":2}`)
	require.Len(t, inv, 2)
	assert.NotEqual(t, inv[0].ID, inv[1].ID)
	assert.Equal(t, "vip", inv[0].User)
	assert.True(t, inv[0].SingleUse)
	assert.Equal(t, "priority", inv[0].Lane)
	assert.InDelta(t, time.Now().Add(time.Hour).UnixMilli(), inv[0].ExpiresAtMs, 5000)

	r := e.enterWith(room, "vip", inv[0].Token)
	require.Equal(t, 200, r.status, "%s", r.body)
	vip := r.json(t)
	assert.Equal(t, "WAITING", vip["state"])
	assert.Equal(t, "priority", vip["lane"])
	assert.EqualValues(t, 1, vip["position"])
	again := e.enterWith(room, "vip", inv[0].Token).json(t)
	assert.Equal(t, vip["waiting_token"], again["waiting_token"], "a repeated enter answers the same entry")

	st := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "alice", bearer: pub["waiting_token"].(string)}).json(t)
	assert.EqualValues(t, 2, st["position"], "the lane is ahead")
	assert.Equal(t, "public", st["lane"])

	// Refusals, each with its code and status.
	e.enterWith(room, "mallory", inv[1].Token).problem(t, 403, "invite_scope")
	e.enterWith(room, "vip", "not-an-invite").problem(t, 403, "invite_invalid")
	e.enterWith(room, "vip", pub["waiting_token"].(string)).problem(t, 403, "invite_invalid")
	open := e.invites(room, `{"single_use":true}`)
	require.Equal(t, 200, e.enterWith(room, "bob", open[0].Token).status)
	e.enterWith(room, "carol", open[0].Token).problem(t, 409, "invite_used")
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "x", body: `{"invite":1}`}).problem(t, 400, "invalid_input")
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "x", body: `{"other":"1"}`}).problem(t, 400, "invalid_input")

	r = e.admin("GET", "/admin/rooms/"+room+"/stats", "")
	require.Equal(t, 200, r.status)
	var s Stats
	require.NoError(t, json.Unmarshal(r.body, &s))
	assert.EqualValues(t, 3, s.Waiting)
	assert.EqualValues(t, 2, s.Priority)
	assert.EqualValues(t, 2, s.InvitesUsed)

	// Bad requests for invites.
	for _, body := range []string{`{"lane":"vip"}`, `{"ttl_ms":0}`, `{"ttl_ms":1000,"expires_at":"2030-01-01T00:00:00Z"}`,
		`{"expires_at":"tomorrow"}`, `{"count":1001}`, `{"count":-1}`, `{"user":"a b"}`, `{"nope":1}`} {
		e.admin("POST", "/admin/rooms/"+room+"/invites", body).problem(t, 400, "invalid_input")
	}
	e.do(req{method: "POST", path: "/admin/rooms/" + room + "/invites", body: `{}`}).problem(t, 401, "admin_unauthorized")
}

// TestEnterBypassInvite: a bypass invite admits at once when capacity
// allows, past the line.
func TestEnterBypassInvite(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 2})
	e.admitted(room, "alice")
	inv := e.invites(room, `{"lane":"bypass"}`)
	r := e.enterWith(room, "vip", inv[0].Token).json(t)
	assert.Equal(t, "ACTIVE", r["state"])
	assert.NotContains(t, r, "lane")
	r = e.enterWith(room, "vip2", inv[0].Token).json(t)
	assert.Equal(t, "WAITING", r["state"], "capacity full: the lane")
	assert.Equal(t, "priority", r["lane"])
}

// TestPageInvite: /wait/{room}?invite= enters with the invite; a bad one is
// answered as the page.
func TestPageInvite(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
	inv := e.invites(room, `{}`)
	r := e.do(req{method: "GET", path: "/wait/" + room + "?invite=" + url.QueryEscape(inv[0].Token), user: "vip"})
	require.Equal(t, 200, r.status, "%s", r.body)
	st, err := e.is.Stats(t.Context(), room)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Priority)
	r = e.do(req{method: "GET", path: "/wait/" + room + "?invite=garbage", user: "vip2"})
	assert.Equal(t, 403, r.status)
	assert.Contains(t, string(r.body), "This invitation cannot be used")
}
