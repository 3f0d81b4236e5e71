package server

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

func TestAdminBan(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	base := "/admin/rooms/" + room

	x := e.admitted(room, "alice")
	bob := e.enter(room, "bob")
	require.Equal(t, "WAITING", bob["state"])
	carol := e.enter(room, "carol")

	// Ban a waiting user: the entry ends (REVOKED, with the ban's end), the line moves up.
	r := e.admin("POST", base+"/ban", `{"user":"bob","duration_ms":3600000,"reason":"scalper"}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	var b BanResponse
	require.NoError(t, json.Unmarshal(r.body, &b))
	assert.Equal(t, "bob", b.User)
	assert.Equal(t, "scalper", b.Reason)
	assert.True(t, b.RemovedWaiting)
	assert.Empty(t, b.RevokedAdmissionID)
	assert.InDelta(t, time.Now().Add(time.Hour).UnixMilli(), b.BannedUntilMs, 5000)

	st := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "bob", bearer: bob["waiting_token"].(string)})
	require.Equal(t, 200, st.status, "%s", st.body)
	assert.Equal(t, "REVOKED", st.json(t)["state"])
	assert.EqualValues(t, b.BannedUntilMs, st.json(t)["banned_until_ms"])
	st = e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "carol", bearer: carol["waiting_token"].(string)})
	assert.EqualValues(t, 1, st.json(t)["position"])
	ev := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/events", user: "bob", bearer: bob["waiting_token"].(string)})
	require.Equal(t, 200, ev.status)
	assert.Contains(t, string(ev.body), `"state":"REVOKED"`, "the event stream shows the final state and ends")

	// Enter is refused with 403 banned, the ban's end as a member and as Retry-After.
	p := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "bob"}).problem(t, 403, "banned")
	assert.EqualValues(t, b.BannedUntilMs, p["banned_until_ms"])
	ra := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "bob"}).header.Get("Retry-After")
	secs, err := strconv.Atoi(ra)
	require.NoError(t, err, ra)
	assert.InDelta(t, 3600, secs, 5)

	// Ban an admitted user: the admission is revoked, completion refused.
	r = e.admin("POST", base+"/ban", `{"user":"alice","duration_ms":60000}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &b))
	assert.Equal(t, x.AdmissionID, b.RevokedAdmissionID)
	assert.False(t, b.RemovedWaiting)
	e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: x.AdmissionToken}).problem(t, 410, "revoked")

	// The list: earliest end first, paged.
	r = e.admin("GET", base+"/bans?limit=1", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	var l BansResponse
	require.NoError(t, json.Unmarshal(r.body, &l))
	assert.EqualValues(t, 2, l.Total)
	require.Len(t, l.Bans, 1)
	assert.Equal(t, "alice", l.Bans[0].User)
	require.NotEmpty(t, l.NextCursor)
	r = e.admin("GET", base+"/bans?limit=1&cursor="+l.NextCursor, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	l = BansResponse{}
	require.NoError(t, json.Unmarshal(r.body, &l))
	require.Len(t, l.Bans, 1)
	assert.Equal(t, "bob", l.Bans[0].User)
	assert.Equal(t, "scalper", l.Bans[0].Reason)
	r = e.admin("GET", base+"/bans", "")
	l = BansResponse{}
	require.NoError(t, json.Unmarshal(r.body, &l))
	assert.Len(t, l.Bans, 2)
	assert.Empty(t, l.NextCursor)

	// Unban: 204, then the user enters again (at the back); a second unban is 404.
	r = e.admin("DELETE", base+"/ban/bob", "")
	require.Equal(t, 204, r.status, "%s", r.body)
	again := e.enter(room, "bob")
	assert.Equal(t, "WAITING", again["state"])
	assert.EqualValues(t, 2, again["position"], "behind carol")
	e.admin("DELETE", base+"/ban/bob", "").problem(t, 404, "not_found")

	// Stats count the bans.
	r = e.admin("GET", base+"/stats", "")
	var s Stats
	require.NoError(t, json.Unmarshal(r.body, &s))
	assert.EqualValues(t, 2, s.Banned)
	assert.EqualValues(t, 1, s.Removed)
	assert.EqualValues(t, 1, s.Revoked)
}

func TestAdminRevokeBans(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 3, SessionDuration: 2 * time.Minute})
	base := "/admin/rooms/" + room

	// By user, the revocation bans for the room's session duration by default.
	e.admitted(room, "alice")
	r := e.admin("POST", base+"/revoke", `{"user":"alice"}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	var rv RevokeResponse
	require.NoError(t, json.Unmarshal(r.body, &rv))
	assert.InDelta(t, rv.RevokedAtMs+120_000, rv.BannedUntilMs, 1)
	p := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "alice"}).problem(t, 403, "banned")
	assert.EqualValues(t, rv.BannedUntilMs, p["banned_until_ms"])

	// ban_ms 0: no ban, the user may enter again at once.
	e.admitted(room, "bob")
	r = e.admin("POST", base+"/revoke", `{"user":"bob","ban_ms":0}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	rv = RevokeResponse{}
	require.NoError(t, json.Unmarshal(r.body, &rv))
	assert.Zero(t, rv.BannedUntilMs)
	assert.Equal(t, "ACTIVE", e.enter(room, "bob")["state"])

	// An explicit ban with a reason.
	e.admitted(room, "carol")
	r = e.admin("POST", base+"/revoke", `{"user":"carol","ban_ms":86400000,"reason":"fraud"}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &rv))
	assert.InDelta(t, rv.RevokedAtMs+86_400_000, rv.BannedUntilMs, 1)
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "carol"}).problem(t, 403, "banned")

	// Bad bans.
	d := e.admitted(room, "dave")
	e.admin("POST", base+"/revoke", `{"admission_id":"`+d.AdmissionID+`","ban_ms":60000}`).problem(t, 400, "invalid_input")
	e.admin("POST", base+"/revoke", `{"user":"dave","ban_ms":-1}`).problem(t, 400, "invalid_input")
	e.admin("POST", base+"/revoke", `{"user":"dave","ban_ms":2592000001}`).problem(t, 400, "invalid_input")
	e.admin("POST", base+"/revoke", `{"user":"dave","ban_ms":"long"}`).problem(t, 400, "invalid_input")
}

func TestAdminBanValidation(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{})
	base := "/admin/rooms/" + room
	for _, c := range []struct {
		body, code string
		status     int
	}{
		{``, "malformed_json", 400},
		{`{"user":`, "malformed_json", 400},
		{`{"duration_ms":60000}`, "invalid_input", 400},                          // missing user
		{`{"user":"","duration_ms":60000}`, "invalid_input", 400},                // empty user
		{`{"user":"a:b","duration_ms":60000}`, "invalid_input", 400},             // not a user id
		{`{"user":"u"}`, "invalid_input", 400},                                   // missing duration
		{`{"user":"u","duration_ms":0}`, "invalid_input", 400},                   // zero
		{`{"user":"u","duration_ms":-5}`, "invalid_input", 400},                  // negative
		{`{"user":"u","duration_ms":2592000001}`, "invalid_input", 400},          // over 30 days
		{`{"user":"u","duration_ms":9223372036854775807}`, "invalid_input", 400}, // absurd
		{`{"user":"u","duration_ms":"1h"}`, "invalid_input", 400},
		{`{"user":"u","duration_ms":1000,"reason":"` + strings.Repeat("x", 201) + `"}`, "invalid_input", 400},
		{`{"user":"u","duration_ms":1000,"until":5}`, "invalid_input", 400}, // unknown member
	} {
		e.admin("POST", base+"/ban", c.body).problem(t, c.status, c.code)
	}
	e.admin("POST", "/admin/rooms/no-such-room-x/ban", `{"user":"u","duration_ms":1000}`).problem(t, 404, "unknown_room")
	e.admin("DELETE", "/admin/rooms/no-such-room-x/ban/u", "").problem(t, 404, "unknown_room")
	e.admin("GET", "/admin/rooms/no-such-room-x/bans", "").problem(t, 404, "unknown_room")
	e.admin("DELETE", base+"/ban/a:b", "").problem(t, 400, "invalid_input")
	e.admin("DELETE", base+"/ban/nobody", "").problem(t, 404, "not_found")
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "cursor=zz", "cursor=5"} {
		e.admin("GET", base+"/bans?"+q, "").problem(t, 400, "invalid_input")
	}
	// The admin token is required.
	e.do(req{method: "POST", path: base + "/ban", body: `{"user":"u","duration_ms":1000}`}).problem(t, 401, "admin_unauthorized")
	e.do(req{method: "GET", path: base + "/bans"}).problem(t, 401, "admin_unauthorized")
	e.do(req{method: "DELETE", path: base + "/ban/u"}).problem(t, 401, "admin_unauthorized")
	// A ban of 30 days is allowed.
	r := e.admin("POST", base+"/ban", `{"user":"u","duration_ms":2592000000}`)
	require.Equal(t, 200, r.status, "%s", r.body)
}
