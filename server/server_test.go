package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/verifier"
)

func TestEnter(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})

	// Fast track: nobody waits, capacity free.
	a := e.enter(room, "alice")
	assert.Equal(t, "ACTIVE", a["state"])
	assert.Equal(t, room, a["room"])
	assert.NotEmpty(t, a["admission_id"])
	assert.NotZero(t, a["expires_at_ms"])
	assert.NotContains(t, a, "position")
	assert.True(t, strings.HasPrefix(a["waiting_token"].(string), "fgw2_"))

	// Capacity used up: bob waits.
	r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "bob"})
	require.Equal(t, 200, r.status)
	b := r.json(t)
	assert.Equal(t, "WAITING", b["state"])
	assert.EqualValues(t, 1, b["position"])
	assert.EqualValues(t, 0, b["ahead"]) // present although zero
	assert.EqualValues(t, 1, b["total_waiting"])
	assert.Contains(t, b, "estimated_wait_ms")
	poll := b["poll_after_ms"].(float64)
	assert.Greater(t, poll, 0.0)
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err)
	assert.Equal(t, int((int64(poll)+999)/1000), ra)
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))

	// Repeated enter: the same place, the same token.
	b2 := e.enter(room, "bob")
	assert.Equal(t, b["waiting_token"], b2["waiting_token"])
	assert.Equal(t, b["arrival"], b2["arrival"])
	assert.EqualValues(t, 1, b2["position"])

	// Errors.
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter"}).problem(t, 401, "missing_user")
	e.do(req{method: "POST", path: "/v1/rooms/a{b}/enter", user: "bob"}).problem(t, 400, "invalid_input")
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "bad user{"}).problem(t, 400, "invalid_input")
	e.do(req{method: "POST", path: "/v1/rooms/no-such-room-x/enter", user: "bob"}).problem(t, 404, "unknown_room")
	closed := e.room(issuer.RoomConfig{State: issuer.RoomClosed})
	e.do(req{method: "POST", path: "/v1/rooms/" + closed + "/enter", user: "bob"}).problem(t, 403, "room_closed")
}

func TestStatusAndLeave(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	e.enter(room, "alice")
	tok := e.enter(room, "bob")["waiting_token"].(string)
	carol := e.enter(room, "carol")["waiting_token"].(string)
	path := "/v1/rooms/" + room + "/status"

	r := e.do(req{method: "GET", path: path, user: "carol", bearer: carol})
	require.Equal(t, 200, r.status, "%s", r.body)
	m := r.json(t)
	assert.Equal(t, "WAITING", m["state"])
	assert.EqualValues(t, 2, m["position"])
	assert.EqualValues(t, 1, m["ahead"])
	assert.EqualValues(t, 2, m["total_waiting"])
	assert.NotEmpty(t, r.header.Get("Retry-After"))

	// Query parameter (EventSource clients).
	r = e.do(req{method: "GET", path: path + "?waiting_token=" + tok, user: "bob"})
	require.Equal(t, 200, r.status)
	assert.EqualValues(t, 1, r.json(t)["position"])

	// Another user's token: owner mismatch (a waiting token is bound to its user).
	e.do(req{method: "GET", path: path, user: "carol", bearer: tok}).problem(t, 403, "token_owner_mismatch")
	// Garbage, or none at all.
	r = e.do(req{method: "GET", path: path, user: "bob", bearer: "garbage"})
	r.problem(t, 401, "invalid_waiting_token")
	assert.NotEmpty(t, r.header.Get("WWW-Authenticate"))
	e.do(req{method: "GET", path: path, user: "bob"}).problem(t, 401, "invalid_waiting_token")
	e.do(req{method: "GET", path: path, bearer: tok}).problem(t, 401, "missing_user")
	e.do(req{method: "GET", path: "/v1/rooms/nope-nope/status", user: "bob", bearer: tok}).problem(t, 403, "token_owner_mismatch")

	// Leave, then the token reports NOT_FOUND; a second leave is 404.
	r = e.do(req{method: "POST", path: "/v1/rooms/" + room + "/leave", user: "bob", bearer: tok})
	require.Equal(t, 204, r.status, "%s", r.body)
	assert.Empty(t, r.body)
	r = e.do(req{method: "GET", path: path, user: "bob", bearer: tok})
	require.Equal(t, 200, r.status)
	assert.Equal(t, "NOT_FOUND", r.json(t)["state"])
	assert.Empty(t, r.header.Get("Retry-After"))
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/leave", user: "bob", bearer: tok}).problem(t, 404, "not_found")
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/leave", user: "bob", bearer: "x"}).problem(t, 401, "invalid_waiting_token")

	// carol moved up.
	assert.EqualValues(t, 1, e.do(req{method: "GET", path: path, user: "carol", bearer: carol}).json(t)["position"])
}

func (e *env) exchange(room, user, tok string) resp {
	return e.do(req{method: "POST", path: "/v1/rooms/" + room + "/exchange", user: user, bearer: tok})
}

func TestExchange(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	alice := e.enter(room, "alice")["waiting_token"].(string)
	e.enter(room, "carol")
	bob := e.enter(room, "bob")["waiting_token"].(string)

	// Still waiting: 409 with the position as data.
	r := e.exchange(room, "bob", bob)
	p := r.problem(t, 409, "not_admitted")
	assert.EqualValues(t, 2, p["position"])
	assert.Contains(t, p["detail"], "position 2")
	assert.NotEmpty(t, r.header.Get("Retry-After"))

	// ACTIVE: an admission token that verifies offline with the ring.
	r = e.exchange(room, "alice", alice)
	require.Equal(t, 200, r.status, "%s", r.body)
	var x ExchangeResponse
	require.NoError(t, json.Unmarshal(r.body, &x))
	v, err := verifier.New(e.ring, verifier.Config{Issuer: "flashgate", Audience: "orders"})
	require.NoError(t, err)
	tok, err := v.Verify(context.Background(), x.AdmissionToken, verifier.Expect{Product: room, User: "alice"})
	require.NoError(t, err)
	assert.Equal(t, x.AdmissionID, tok.ID)
	assert.Equal(t, tok.ExpiresAt.UnixMilli(), x.ExpiresAtMs)
	assert.Equal(t, tok.IssuedAt.UnixMilli(), x.IssuedAtMs)
	// expires_at and issued_at, deprecated: the same in Unix seconds.
	assert.Equal(t, tok.ExpiresAt.Unix(), x.ExpiresAt)
	assert.Equal(t, tok.IssuedAt.Unix(), x.IssuedAt)
	assert.EqualValues(t, 1, x.AdmissionNumber)
	assert.Greater(t, x.ExpiresAtMs, x.IssuedAtMs)

	// Repeat: the same jti.
	r = e.exchange(room, "alice", alice)
	require.Equal(t, 200, r.status)
	var y ExchangeResponse
	require.NoError(t, json.Unmarshal(r.body, &y))
	assert.Equal(t, x.AdmissionID, y.AdmissionID)
	assert.Equal(t, x.ExpiresAtMs, y.ExpiresAtMs)

	e.exchange(room, "bob", alice).problem(t, 403, "token_owner_mismatch")
	e.exchange(room, "alice", "").problem(t, 401, "invalid_waiting_token")
}

// admitted enters user alone into a fresh room and exchanges the token.
func (e *env) admitted(room, user string) ExchangeResponse {
	e.t.Helper()
	ent := e.enter(room, user)
	require.Equal(e.t, "ACTIVE", ent["state"])
	r := e.exchange(room, user, ent["waiting_token"].(string))
	require.Equal(e.t, 200, r.status, "%s", r.body)
	var x ExchangeResponse
	require.NoError(e.t, json.Unmarshal(r.body, &x))
	return x
}

func TestComplete(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{})
	x := e.admitted(room, "alice")

	// Product is required and never taken from the token.
	e.do(req{method: "POST", path: "/v1/complete", bearer: x.AdmissionToken}).problem(t, 400, "invalid_input")
	// Wrong product, wrong user: the token is fine but not for this request.
	p := e.do(req{method: "POST", path: "/v1/complete?product=other", bearer: x.AdmissionToken}).problem(t, 403, "admission_token_scope")
	assert.Equal(t, "bad_product", p["reason"])
	p = e.do(req{method: "POST", path: "/v1/complete?product=" + room, user: "mallory", bearer: x.AdmissionToken}).problem(t, 403, "admission_token_scope")
	assert.Equal(t, "bad_user", p["reason"])
	// room is the name; product its deprecated alias: either alone works,
	// both given must agree, in the query or the body.
	p = e.do(req{method: "POST", path: "/v1/complete?room=other", bearer: x.AdmissionToken}).problem(t, 403, "admission_token_scope")
	assert.Equal(t, "bad_product", p["reason"])
	for _, bad := range []req{
		{path: "/v1/complete?room=" + room + "&product=other"},
		{path: "/v1/complete?product=" + room + "&room=other"},
		{path: "/v1/complete?room=" + room, body: `{"product":"other"}`},
		{path: "/v1/complete", body: `{"room":"` + room + `","product":"other"}`},
		{path: "/v1/complete?product=" + room, body: `{"room":"other"}`},
	} {
		bad.method, bad.bearer = "POST", x.AdmissionToken
		e.do(bad).problem(t, 400, "invalid_input")
	}
	// Query and body disagree.
	e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: x.AdmissionToken,
		body: `{"product":"other"}`}).problem(t, 400, "invalid_input")
	// No token.
	p = e.do(req{method: "POST", path: "/v1/complete?product=" + room}).problem(t, 401, "invalid_admission_token")
	assert.Equal(t, "missing", p["reason"])

	// Tampered: flip a payload character (sub) → signature fails.
	parts := strings.Split(x.AdmissionToken, ".")
	pl, _ := b64.DecodeString(parts[1])
	pl = []byte(strings.Replace(string(pl), `"sub":"alice"`, `"sub":"alicf"`, 1))
	forged := parts[0] + "." + b64.EncodeToString(pl) + "." + parts[2]
	p = e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: forged}).problem(t, 401, "invalid_admission_token")
	assert.Equal(t, "bad_signature", p["reason"])
	p = e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: "fgw2_AAAA_e_1_AAAAAAAAAAAAAAAAAAAAAA"}).problem(t, 401, "invalid_admission_token")
	assert.Equal(t, "malformed", p["reason"])

	// Expired token (signed by the ring, exp in the past).
	now := time.Now().Unix()
	old, err := e.ring.Sign([]byte(`{"iss":"flashgate","aud":"orders","sub":"alice","product":"` + room +
		`","jti":"` + x.AdmissionID + `","iat":` + strconv.FormatInt(now-400, 10) + `,"exp":` + strconv.FormatInt(now-100, 10) + `}`))
	require.NoError(t, err)
	p = e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: old}).problem(t, 401, "invalid_admission_token")
	assert.Equal(t, "expired", p["reason"])

	// OK (product in the body, user header matching), then repeated.
	r := e.do(req{method: "POST", path: "/v1/complete", user: "alice", bearer: x.AdmissionToken, body: `{"product":"` + room + `"}`})
	require.Equal(t, 200, r.status, "%s", r.body)
	var c1 CompleteResponse
	require.NoError(t, json.Unmarshal(r.body, &c1))
	assert.Equal(t, CompleteResponse{State: "COMPLETED", AdmissionID: x.AdmissionID, CompletedAtMs: c1.CompletedAtMs}, c1)
	assert.NotZero(t, c1.CompletedAtMs)
	r = e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: x.AdmissionToken})
	require.Equal(t, 200, r.status, "%s", r.body)
	var c2 CompleteResponse
	require.NoError(t, json.Unmarshal(r.body, &c2))
	assert.True(t, c2.Repeated)
	assert.Equal(t, c1.CompletedAtMs, c2.CompletedAtMs)

	// After completion the user may queue again.
	assert.Equal(t, "ACTIVE", e.enter(room, "alice")["state"])
	// Body errors.
	e.do(req{method: "POST", path: "/v1/complete", bearer: x.AdmissionToken, body: `{"product":`}).problem(t, 400, "malformed_json")
	e.do(req{method: "POST", path: "/v1/complete", bearer: x.AdmissionToken, body: `{"product":"a","x":1}`}).problem(t, 400, "invalid_input")
}

func (e *env) admin(method, path, body string) resp {
	return e.do(req{method: method, path: path, bearer: adminToken, body: body})
}

func TestAdmin(t *testing.T) {
	e := newEnv(t)
	room := "adm-" + strings.TrimPrefix(e.room(issuer.RoomConfig{}), "srv-") // a name not created yet
	base := "/admin/rooms/" + room

	// Authorization.
	e.do(req{method: "GET", path: "/admin/rooms"}).problem(t, 401, "admin_unauthorized")
	r := e.do(req{method: "GET", path: "/admin/rooms", bearer: "wrong"})
	r.problem(t, 401, "admin_unauthorized")
	assert.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
	e.do(req{method: "PUT", path: base, body: `{}`}).problem(t, 401, "admin_unauthorized")
	e.do(req{method: "GET", path: "/admin/rooms", hdr: map[string]string{"Authorization": "Basic " + adminToken}}).problem(t, 401, "admin_unauthorized")

	// Unknown room.
	e.admin("GET", base, "").problem(t, 404, "unknown_room")
	e.admin("GET", base+"/stats", "").problem(t, 404, "unknown_room")
	e.admin("POST", base+"/pause", "").problem(t, 404, "unknown_room")

	// PUT creates (201) with defaults for omitted fields.
	r = e.admin("PUT", base, `{"capacity":2,"rate_per_minute":120,"session_seconds":60}`)
	require.Equal(t, 201, r.status, "%s", r.body)
	var rc RoomConfig
	require.NoError(t, json.Unmarshal(r.body, &rc))
	assert.Equal(t, RoomConfig{Room: room, Capacity: 2, RatePerMinute: 120, SessionMs: 60000, SessionSeconds: 60,
		TickMs: 1000, TickBatch: issuer.DefaultTickBatch, State: "open", ArrivalWindowMs: 60000, PreQueue: "fifo", PreQueueDeprecated: "fifo"}, rc)
	// PUT updates (200), keeping omitted fields.
	r = e.admin("PUT", base, `{"batch":5,"tick_ms":500}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &rc))
	assert.Equal(t, RoomConfig{Room: room, Capacity: 2, RatePerMinute: 120, SessionMs: 60000, SessionSeconds: 60,
		TickMs: 500, TickBatch: 5, State: "open", ArrivalWindowMs: 60000, PreQueue: "fifo", PreQueueDeprecated: "fifo"}, rc)
	cfg, err := e.is.Room(context.Background(), room)
	require.NoError(t, err)
	assert.Equal(t, 500*time.Millisecond, cfg.Tick)
	// The arrival window: ms in and out, 0 turns it off, GET reads it back.
	for _, ms := range []int64{45000, 0, 1500} {
		r = e.admin("PUT", base, fmt.Sprintf(`{"arrival_window_ms":%d}`, ms))
		require.Equal(t, 200, r.status, "%s", r.body)
		assert.EqualValues(t, ms, r.json(t)["arrival_window_ms"])
		assert.EqualValues(t, ms, e.admin("GET", base, "").json(t)["arrival_window_ms"])
	}
	cfg, err = e.is.Room(context.Background(), room)
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Millisecond, cfg.ArrivalWindow)
	assert.EqualValues(t, 5, cfg.TickBatch, "kept")
	e.admin("PUT", base, `{"arrival_window_ms":-1}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"arrival_window_ms":999}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"arrival_window_ms":900001}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"arrival_window_ms":60000}`)
	// Bad configs.
	e.admin("PUT", base, `{"capacity":2,"colour":"red"}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"capacity":0}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"capacity":-3}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"session_seconds":100000}`).problem(t, 400, "invalid_input")
	// session_ms is the name; session_seconds its deprecated alias (read and
	// emitted for one release); both given must agree.
	r = e.admin("PUT", base, `{"session_ms":90000}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.EqualValues(t, 90000, r.json(t)["session_ms"])
	assert.EqualValues(t, 90, r.json(t)["session_seconds"])
	r = e.admin("PUT", base, `{"session_ms":60000,"session_seconds":60}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.EqualValues(t, 60000, r.json(t)["session_ms"])
	e.admin("PUT", base, `{"session_ms":60000,"session_seconds":61}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"session_ms":1500}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"session_ms":100000000}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"tick_ms":10}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"state":"melted"}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"capacity":"many"}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"capacity":`).problem(t, 400, "malformed_json")
	e.admin("PUT", base, ``).problem(t, 400, "malformed_json")
	e.admin("PUT", "/admin/rooms/a{b}", `{}`).problem(t, 400, "invalid_input")

	// GET one, list.
	r = e.admin("GET", base, "")
	require.Equal(t, 200, r.status)
	assert.Equal(t, "open", r.json(t)["state"])
	r = e.admin("GET", "/admin/rooms", "")
	require.Equal(t, 200, r.status)
	assert.Contains(t, r.json(t)["rooms"], room)

	// pause / open / close.
	for _, st := range []string{"pause", "open", "close"} {
		r = e.admin("POST", base+"/"+st, "")
		require.Equal(t, 200, r.status, "%s", r.body)
		want := map[string]string{"pause": "paused", "open": "open", "close": "closed"}[st]
		assert.Equal(t, want, r.json(t)["state"])
		assert.EqualValues(t, 2, r.json(t)["capacity"])
	}
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "u1"}).problem(t, 403, "room_closed")
	e.admin("POST", base+"/open", "")

	// Revoke, then completing the token is refused (410).
	x := e.admitted(room, "alice")
	e.admin("POST", base+"/revoke", `{}`).problem(t, 400, "invalid_input")
	e.admin("POST", base+"/revoke", ``).problem(t, 400, "malformed_json")
	e.admin("POST", base+"/revoke", `{"admission_id":"nope"}`).problem(t, 404, "not_found")
	r = e.admin("POST", base+"/revoke", `{"user":"alice"}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	var rv RevokeResponse
	require.NoError(t, json.Unmarshal(r.body, &rv))
	assert.Equal(t, x.AdmissionID, rv.AdmissionID)
	assert.False(t, rv.Repeated)
	r = e.admin("POST", base+"/revoke", `{"admission_id":"`+x.AdmissionID+`"}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &rv))
	assert.True(t, rv.Repeated)
	e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: x.AdmissionToken}).problem(t, 410, "revoked")

	// A completed admission cannot be revoked.
	y := e.admitted(room, "bob")
	r = e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: y.AdmissionToken})
	require.Equal(t, 200, r.status, "%s", r.body)
	e.admin("POST", base+"/revoke", `{"admission_id":"`+y.AdmissionID+`"}`).problem(t, 409, "completed")

	// Stats.
	r = e.admin("GET", base+"/stats", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	var st Stats
	require.NoError(t, json.Unmarshal(r.body, &st))
	assert.Equal(t, room, st.Room)
	assert.Equal(t, 2, st.Config.Capacity)
	assert.EqualValues(t, 60, st.Config.SessionSeconds)
	assert.EqualValues(t, 60000, st.Config.ArrivalWindowMs)
	assert.EqualValues(t, 2, st.Admitted)
	assert.EqualValues(t, 1, st.Revoked)
	assert.EqualValues(t, 1, st.Completed)
	assert.NotZero(t, st.AtMs)
}

// The event window through the admin API: RFC 3339 in, RFC 3339 out, ""
// removes a bound; before opens_at the room lines users up without
// admitting them (stats.state "paused", the entry's room_state too).
func TestAdminEventWindow(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 5})
	base := "/admin/rooms/" + room
	opens := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	closes := opens.Add(2 * time.Hour)
	r := e.admin("PUT", base, `{"opens_at":"`+opens.Format(time.RFC3339)+`","closes_at":"`+closes.Format(time.RFC3339)+`"}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	var rc RoomConfig
	require.NoError(t, json.Unmarshal(r.body, &rc))
	require.NotNil(t, rc.OpensAt)
	require.NotNil(t, rc.ClosesAt)
	assert.True(t, rc.OpensAt.Equal(opens), "%v", rc.OpensAt)
	assert.True(t, rc.ClosesAt.Equal(closes), "%v", rc.ClosesAt)
	assert.Equal(t, "open", rc.State)

	r = e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "early"})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "WAITING", r.json(t)["state"], "no fast track before the window")
	assert.Equal(t, "paused", r.json(t)["room_state"])
	r = e.admin("GET", base+"/stats", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	var st Stats
	require.NoError(t, json.Unmarshal(r.body, &st))
	assert.Equal(t, "paused", st.State)
	assert.Equal(t, "open", st.Config.State)

	e.admin("PUT", base, `{"opens_at":"tomorrow"}`).problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"closes_at":"`+opens.Add(-time.Minute).Format(time.RFC3339)+`"}`).problem(t, 400, "invalid_input")

	r = e.admin("PUT", base, `{"opens_at":""}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.NotContains(t, r.json(t), "opens_at", "\"\" removes the bound")
	assert.Contains(t, r.json(t), "closes_at")
	r = e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "later"})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "open", r.json(t)["room_state"])
}

// TestAdminEventWindowMs: the event window in Unix ms (docs/http-api.md
// "Units"): opens_at_ms and closes_at_ms out, next to the deprecated RFC
// 3339 opens_at and closes_at for one release; in, either form (both must
// name the same instant), 0 removing a bound like "".
func TestAdminEventWindowMs(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 5})
	base := "/admin/rooms/" + room
	opens := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	closes := opens.Add(2 * time.Hour)
	r := e.admin("PUT", base, fmt.Sprintf(`{"opens_at_ms":%d,"closes_at":%q}`, opens.UnixMilli(), closes.Format(time.RFC3339Nano)))
	require.Equal(t, 200, r.status, "%s", r.body)
	var rc RoomConfig
	require.NoError(t, json.Unmarshal(r.body, &rc))
	assert.Equal(t, opens.UnixMilli(), rc.OpensAtMs)
	assert.Equal(t, closes.UnixMilli(), rc.ClosesAtMs)
	require.NotNil(t, rc.OpensAt, "deprecated, still emitted")
	assert.True(t, rc.OpensAt.Equal(opens), "%v", rc.OpensAt)

	// Both forms: the same instant is fine, different ones are refused.
	r = e.admin("PUT", base, fmt.Sprintf(`{"opens_at_ms":%d,"opens_at":%q}`, opens.UnixMilli(), opens.Format(time.RFC3339Nano)))
	require.Equal(t, 200, r.status, "%s", r.body)
	e.admin("PUT", base, fmt.Sprintf(`{"opens_at_ms":%d,"opens_at":%q}`, opens.UnixMilli()+1000, opens.Format(time.RFC3339Nano))).
		problem(t, 400, "invalid_input")
	e.admin("PUT", base, `{"opens_at_ms":-1}`).problem(t, 400, "invalid_input")

	// The closed-out room's instants are _ms too.
	r = e.admin("PUT", base, `{"opens_at_ms":0}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	m := r.json(t)
	assert.NotContains(t, m, "opens_at_ms", "0 removes the bound")
	assert.NotContains(t, m, "opens_at")
	assert.EqualValues(t, closes.UnixMilli(), m["closes_at_ms"])
	r = e.admin("DELETE", base, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &rc))
	require.NotNil(t, rc.DeletedAt)
	require.NotNil(t, rc.EndedAt)
	assert.Equal(t, rc.DeletedAt.UnixMilli(), rc.DeletedAtMs)
	assert.Equal(t, rc.EndedAt.UnixMilli(), rc.EndedAtMs)
	assert.NotZero(t, rc.DeletedAtMs)
}

func TestAdminDisabled(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.AdminToken = "" }))
	e.do(req{method: "GET", path: "/admin/rooms", bearer: ""}).problem(t, 404, "unknown_route")
	e.do(req{method: "GET", path: "/admin/rooms", bearer: "anything"}).problem(t, 404, "unknown_route")
}

func TestJWKSAndHealth(t *testing.T) {
	e := newEnv(t)
	r := e.do(req{method: "GET", path: "/.well-known/jwks.json"})
	require.Equal(t, 200, r.status)
	assert.Equal(t, "public, max-age=60", r.header.Get("Cache-Control"))
	assert.Contains(t, r.header.Get("Content-Type"), "application/json")
	set, err := verifier.ParseJWKS(r.body)
	require.NoError(t, err)
	assert.Equal(t, []string{"test"}, set.KeyIDs())

	assert.Equal(t, 200, e.do(req{method: "GET", path: "/healthz"}).status)
	assert.Equal(t, 200, e.do(req{method: "GET", path: "/readyz"}).status)
}

type brokenRing struct{ *testRing }

func (brokenRing) PublicJWKS() ([]byte, error) { return []byte(`{"keys":[]}`), nil }

func TestReadyzNotReady(t *testing.T) {
	// Redis down: an issuer pointed at a closed port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	ring := newTestRing(t)
	srv, err := New(Options{Issuer: newIssuer(t, rdb, ring), Keys: ring, Logger: quietLog})
	require.NoError(t, err)
	e := &env{t: t, srv: srv, ring: ring}
	r := e.do(req{method: "GET", path: "/readyz"})
	r.problem(t, 503, "not_ready")
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	assert.NotContains(t, string(r.body), addr, "internal error text leaked")
	assert.Equal(t, 200, e.do(req{method: "GET", path: "/healthz"}).status)
	// Domain calls answer 503 unavailable, without the Redis error text.
	r = e.do(req{method: "POST", path: "/v1/rooms/r1/enter", user: "u"})
	r.problem(t, 503, "unavailable")
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	assert.NotContains(t, string(r.body), addr)

	// Keys not loaded.
	e2 := newEnv(t, withOptions(func(o *Options) { o.Keys = brokenRing{o.Keys.(*testRing)} }))
	e2.do(req{method: "GET", path: "/readyz"}).problem(t, 503, "not_ready")
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	e.enter(room, "alice")
	e.enter(room, "bob")
	e.do(req{method: "GET", path: "/nope"})
	r := e.do(req{method: "GET", path: "/metrics"})
	require.Equal(t, 200, r.status)
	body := string(r.body)
	for _, want := range []string{
		`flashgate_http_requests_total{method="POST",route="/v1/rooms/:room/enter",status="200"} 2`,
		`flashgate_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`flashgate_http_request_duration_seconds_bucket{method="POST",route="/v1/rooms/:room/enter",le="+Inf"} 2`,
		`flashgate_sse_streams_open 0`,
		`flashgate_enter_script_calls_total 2`, // sequential enters: one call each
		`flashgate_enter_script_users_total 2`,
		`flashgate_script_batch_calls_total{op="enter"} 2`,
		`flashgate_script_batch_items_total{op="enter"} 2`,
		`flashgate_script_batch_calls_total{op="complete"} 0`,
		`flashgate_room_waiting{room="` + room + `"} 1`,
		`flashgate_room_live{room="` + room + `"} 1`,
		`flashgate_room_capacity{room="` + room + `"} 1`,
		`flashgate_room_admitted_total{room="` + room + `"} 1`,
		`go_goroutines`,
	} {
		assert.Contains(t, body, want)
	}
}

func TestRouterAndBodyErrors(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{})
	e.do(req{method: "GET", path: "/v1/nothing"}).problem(t, 404, "unknown_route")
	e.do(req{method: "DELETE", path: "/v1/rooms/" + room + "/enter"}).problem(t, 405, "method_not_allowed")
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "u", body: "x=1",
		ctype: "application/x-www-form-urlencoded"}).problem(t, 415, "unsupported_media_type")
	e.do(req{method: "POST", path: "/v1/complete", body: `{"product":"p"}`, ctype: "text/plain"}).problem(t, 415, "unsupported_media_type")
	e.do(req{method: "PUT", path: "/admin/rooms/" + room, bearer: adminToken, body: `{}`, ctype: "application/json; charset=utf-8"})
	// An empty JSON body is fine on enter.
	r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "u", body: "{}"})
	assert.Equal(t, 200, r.status, "%s", r.body)
}

// TestBodyLimit runs over TCP: fasthttp refuses an oversized body while
// reading it, which app.Test reports as an error instead of a response.
func TestBodyLimit(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.BodyLimit = 1024 }))
	base := e.listen()
	body := `{"product":"` + strings.Repeat("p", 2000) + `"}`
	res, err := httpPost(base+"/v1/complete", "application/json", body)
	require.NoError(t, err)
	r := readResp(t, res)
	r.problem(t, 413, "body_too_large")
}

func TestProblemTable(t *testing.T) {
	for _, c := range flashgate.Codes {
		assert.True(t, problem.Known(string(c)), "issuer code %s has no row", c)
	}
	// Internal errors never leak their text.
	p := toProblem(&flashgate.Error{Code: flashgate.CodeInternal, Message: "secret detail"})
	assert.Equal(t, 500, p.Status)
	assert.NotContains(t, p.Detail, "secret")
	p = toProblem(assertErr("boom at 10.0.0.1"))
	assert.Equal(t, 500, p.Status)
	assert.NotContains(t, p.Detail, "10.0.0.1")
}

type assertErr string

func (e assertErr) Error() string { return string(e) }

func TestNewValidates(t *testing.T) {
	_, err := New(Options{})
	assert.Error(t, err)
	ring := newTestRing(t)
	_, err = New(Options{Keys: ring})
	assert.Error(t, err)
}

// TestCompleteChecksTheIssuersClaims: /v1/complete verifies with the iss
// and aud the issuer mints, whatever they are (not a default of its own).
func TestCompleteChecksTheIssuersClaims(t *testing.T) {
	e := newEnv(t, privateRedis(),
		withIssuer(func(c *issuer.Config) { c.Issuer, c.Audience = "https://queue.example", "checkout" }),
		withOptions(func(o *Options) { o.AdminToken = "" }))
	room := e.room(issuer.RoomConfig{})
	tok := e.enter(room, "alice")["waiting_token"].(string)
	x := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/exchange", user: "alice", bearer: tok})
	require.Equal(t, 200, x.status, "body: %s", x.body)
	r := e.do(req{method: "POST", path: "/v1/complete?product=" + room, user: "alice",
		bearer: x.json(t)["admission_token"].(string)})
	require.Equal(t, 200, r.status, "body: %s", r.body)
	assert.Equal(t, "COMPLETED", r.json(t)["state"])
}

// /v1/complete takes a token this issuer minted by its note (no Ed25519
// arithmetic) and any other valid token by its signature, with the same
// answers: a token signed by the ring but never exchanged completes too; an
// altered minted token is refused as forged (bad_signature), also while
// Redis is gone (not 503: the signature decides first). Counted by check.
func TestCompleteByMintedNote(t *testing.T) {
	rs := redistest.Start(t)
	e := newEnv(t, withRedis(rs.Client(t)))
	room := e.room(issuer.RoomConfig{})
	checks := func() (minted, signature float64) {
		return testutil.ToFloat64(e.srv.m.mintedChecks), testutil.ToFloat64(e.srv.m.signatureChecks)
	}
	complete := func(token string) resp {
		return e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: token})
	}

	x := e.admitted(room, "alice")
	require.NoError(t, e.is.WaitMinted(context.Background()))
	forged := x.AdmissionToken[:len(x.AdmissionToken)-2] + "AA"
	if forged == x.AdmissionToken {
		forged = x.AdmissionToken[:len(x.AdmissionToken)-2] + "BA"
	}
	p := complete(forged).problem(t, 401, "invalid_admission_token")
	assert.Equal(t, "bad_signature", p["reason"])
	m, s := checks()
	assert.Equal(t, [2]float64{0, 0}, [2]float64{m, s}, "a refused token counts under neither")

	r := complete(x.AdmissionToken)
	require.Equal(t, 200, r.status, "%s", r.body)
	m, s = checks()
	assert.Equal(t, [2]float64{1, 0}, [2]float64{m, s}, "the minted token: by its note")
	r = complete(x.AdmissionToken)
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), `"repeated":true`)

	// Bob's admission, its token signed by the ring directly (as a replica that
	// does not note, or before the note lands): by its signature.
	b, err := e.is.Enter(context.Background(), room, "bob")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, b.State)
	now := time.Now().Unix()
	tok, err := e.ring.Sign([]byte(`{"iss":"flashgate","aud":"orders","sub":"bob","product":"` + room +
		`","jti":"` + b.AdmissionID + `","iat":` + strconv.FormatInt(now, 10) + `,"exp":` + strconv.FormatInt(now+60, 10) + `}`))
	require.NoError(t, err)
	r = complete(tok)
	require.Equal(t, 200, r.status, "%s", r.body)
	m, s = checks()
	assert.Equal(t, [2]float64{2, 1}, [2]float64{m, s})
	assert.Contains(t, string(e.do(req{method: "GET", path: "/metrics"}).body), `flashgate_complete_token_checks_total{check="minted"} 2`)

	// Redis gone: a forged token is still refused as forged.
	rs.Kill()
	p = complete(forged).problem(t, 401, "invalid_admission_token")
	assert.Equal(t, "bad_signature", p["reason"])
	complete(tok).problem(t, 503, "unavailable")
}

// TestReadyzReplica: /readyz/replica, the chart's readiness probe, stays
// 200 while Redis is away (every replica stays in the Service and answers
// 503 unavailable per request), and turns 503 not_ready once Shutdown has
// begun; /readyz, the deep check, follows Redis. (Before: the chart probed
// /readyz, so a Redis failover took every pod out of the Service at once.)
func TestReadyzReplica(t *testing.T) {
	e := newEnv(t)
	assert.Equal(t, 200, e.do(req{method: "GET", path: "/readyz/replica"}).status)
	down := newEnv(t, withRedis(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})))
	down.do(req{method: "GET", path: "/readyz"}).problem(t, 503, "not_ready")
	r := down.do(req{method: "GET", path: "/readyz/replica"})
	assert.Equal(t, 200, r.status, "body: %s", r.body)
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
	require.NoError(t, e.srv.Shutdown(context.Background()))
	e.do(req{method: "GET", path: "/readyz/replica"}).problem(t, 503, "not_ready")
	noKeys := newEnv(t, withOptions(func(o *Options) { o.Keys = brokenRing{o.Keys.(*testRing)} }))
	noKeys.do(req{method: "GET", path: "/readyz/replica"}).problem(t, 503, "not_ready")
}
