package server

import (
	"encoding/json"
	"fmt"
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
	open := e.invites(room, `{}`)
	assert.True(t, open[0].SingleUse, "single use unless the request says reusable")
	require.Equal(t, 200, e.enterWith(room, "bob", open[0].Token).status)
	e.enterWith(room, "carol", open[0].Token).problem(t, 409, "invite_used")
	shared := e.invites(room, `{"reusable":true}`)
	assert.False(t, shared[0].SingleUse)
	require.Equal(t, 200, e.enterWith(room, "dave", shared[0].Token).status)
	require.Equal(t, 200, e.enterWith(room, "erin", shared[0].Token).status)
	for _, body := range []string{`{"single_use":false}`, `{"single_use":true,"reusable":true}`} {
		e.admin("POST", "/admin/rooms/"+room+"/invites", body).problem(t, 400, "invalid_input")
	}
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "x", body: `{"invite":1}`}).problem(t, 400, "invalid_input")
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "x", body: `{"other":"1"}`}).problem(t, 400, "invalid_input")

	r = e.admin("GET", "/admin/rooms/"+room+"/stats", "")
	require.Equal(t, 200, r.status)
	var s Stats
	require.NoError(t, json.Unmarshal(r.body, &s))
	assert.EqualValues(t, 5, s.Waiting)
	assert.EqualValues(t, 4, s.Priority)
	assert.EqualValues(t, 4, s.InvitesUsed)

	// An expiry in Unix ms, or as RFC 3339 (the same instant).
	exp := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	inv = e.invites(room, fmt.Sprintf(`{"expires_at_ms":%d}`, exp.UnixMilli()))
	assert.Equal(t, exp.UnixMilli(), inv[0].ExpiresAtMs)
	inv = e.invites(room, fmt.Sprintf(`{"expires_at_ms":%d,"expires_at":%q}`, exp.UnixMilli(), exp.UTC().Format(time.RFC3339)))
	assert.Equal(t, exp.UnixMilli(), inv[0].ExpiresAtMs)

	// Bad requests for invites.
	for _, body := range []string{`{"lane":"vip"}`, `{"ttl_ms":0}`, `{"ttl_ms":1000,"expires_at":"2030-01-01T00:00:00Z"}`,
		`{"ttl_ms":1000,"expires_at_ms":1900000000000}`, `{"expires_at_ms":0}`, `{"expires_at_ms":-5}`,
		`{"expires_at_ms":1900000000000,"expires_at":"2030-01-01T00:00:00Z"}`,
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
	inv := e.invites(room, `{"lane":"bypass","reusable":true}`)
	r := e.enterWith(room, "vip", inv[0].Token).json(t)
	assert.Equal(t, "ACTIVE", r["state"])
	assert.NotContains(t, r, "lane")
	r = e.enterWith(room, "vip2", inv[0].Token).json(t)
	assert.Equal(t, "WAITING", r["state"], "capacity full: the lane")
	assert.Equal(t, "priority", r["lane"])
}

// TestPageInvite: GET and HEAD /wait/{room}?invite= enter nobody (link
// scanners, unfurlers and prefetch do not use the invite up): they answer a
// confirmation page whose form POSTs the invite; the POST enters with it and
// sends the browser on (303) to the page, which then shows the lane's place.
// Refusals are answered as the page.
func TestPageInvite(t *testing.T) {
	e := pageEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
	inv := e.invites(room, `{}`)
	link := "/wait/" + room + "?invite=" + url.QueryEscape(inv[0].Token) + "&return=" + url.QueryEscape(shop+"/vip")
	for _, method := range []string{"GET", "HEAD", "GET"} {
		r := e.do(req{method: method, path: link})
		require.Equal(t, 200, r.status, "%s %s", method, r.body)
		assertPageHeaders(t, r)
		if method == "GET" {
			assert.Equal(t, "invited", dataAttr(t, r.body, "state"))
			assert.Contains(t, string(r.body), `<form class="only-invited" id="invite" method="post" action="/wait/`+room+`">`)
			assert.Contains(t, string(r.body), `<input type="hidden" name="invite" value="`+inv[0].Token+`">`)
			assert.Contains(t, string(r.body), `<input type="hidden" name="return" value="`+shop+`/vip">`)
			assert.Contains(t, string(r.body), "<title>You’re invited · "+room+"</title>")
		}
	}
	st, err := e.is.Stats(t.Context(), room)
	require.NoError(t, err)
	assert.Zero(t, st.Entered, "a GET or HEAD of an invite link enters nobody")
	assert.Zero(t, st.InvitesUsed)

	// The button: POST uses the invite, then 303 to the page.
	post := func(invite, cookie string) resp {
		form := url.Values{"invite": {invite}, "return": {shop + "/vip"}}
		var hdr map[string]string
		if cookie != "" {
			hdr = withCookie(VisitorHostCookie, cookie)
		}
		return e.do(req{method: "POST", path: "/wait/" + room, body: form.Encode(),
			ctype: "application/x-www-form-urlencoded", hdr: hdr})
	}
	r := post(inv[0].Token, "")
	require.Equal(t, 303, r.status, "%s", r.body)
	assert.Equal(t, "/wait/"+room+"?return="+url.QueryEscape(shop+"/vip"), r.header.Get("Location"))
	v := visitorCookie(t, r, true)
	st, err = e.is.Stats(t.Context(), room)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Priority)
	assert.EqualValues(t, 1, st.InvitesUsed)
	page := e.page(room, "", v)
	require.Equal(t, 200, page.status, "%s", page.body)
	assert.Equal(t, "1", dataAttr(t, page.body, "position"))
	st, err = e.is.Stats(t.Context(), room)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Entered, "the page answers the lane's entry: no second one")
	require.Equal(t, 303, post(inv[0].Token, v).status, "a repeated post answers the same entry")

	// Another visitor with the used invite; a bad one; none.
	r = post(inv[0].Token, "")
	assert.Equal(t, 409, r.status)
	assert.Contains(t, string(r.body), "This invitation has already been used")
	r = post("garbage", "")
	assert.Equal(t, 403, r.status)
	assert.Contains(t, string(r.body), "This invitation cannot be used")
	assert.Equal(t, 403, post("", "").status)

	// An invite link to a name no room can have: the unknown page, no form.
	r = e.do(req{method: "GET", path: "/wait/Not%20a%20room?invite=" + url.QueryEscape(inv[0].Token)})
	assert.Equal(t, 400, r.status)
	assert.Equal(t, "unknown", dataAttr(t, r.body, "state"))
	assert.NotContains(t, string(r.body), "Not a room")
}
