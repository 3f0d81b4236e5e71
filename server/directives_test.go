package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// TestStopRoute: POST /admin/rooms/{room}/stop pauses the open room, is
// published at once in /.well-known/flashgate-directives.json (this
// replica's cache is dropped) with Cache-Control max-age =
// Options.DirectiveMaxAge, and /v1/complete refuses the admissions issued
// before it with 503 room_stopped and Retry-After.
func TestStopRoute(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.DirectiveMaxAge = 7 * time.Second }))
	room := e.room(issuer.RoomConfig{})
	x := e.admitted(room, "alice")

	doc := func() directiveDoc {
		r := e.do(req{method: "GET", path: "/.well-known/flashgate-directives.json"})
		require.Equal(t, 200, r.status, "%s", r.body)
		assert.Equal(t, "public, max-age=7", r.header.Get("Cache-Control"))
		var d directiveDoc
		require.NoError(t, json.Unmarshal(r.body, &d))
		return d
	}
	_, listed := doc().Rooms[room]
	require.False(t, listed, "no stop yet")

	r := e.admin("POST", "/admin/rooms/"+room+"/stop", `{"now":1}`)
	r.problem(t, 400, "invalid_input")
	r = e.admin("POST", "/admin/rooms/"+room+"/stop", ``)
	require.Equal(t, 200, r.status, "%s", r.body)
	var st StopResponse
	require.NoError(t, json.Unmarshal(r.body, &st))
	assert.Equal(t, StopResponse{Room: room, NotBefore: st.NotBefore, Paused: true, State: "paused", EdgeMaxAgeMs: 7000, EdgeMaxAgeS: 7}, st)
	assert.Greater(t, st.NotBefore, x.IssuedAt, "after the token's iat (Unix s)")

	assert.Equal(t, roomDirective{st.NotBefore}, doc().Rooms[room], "published at once through this replica")

	p := e.do(req{method: "POST", path: "/v1/complete?product=" + room, user: "alice", bearer: x.AdmissionToken}).problem(t, 503, "room_stopped")
	assert.NotEmpty(t, p["detail"])
	e.admin("POST", "/admin/rooms/"+room+"-none/stop", ``).problem(t, 404, "unknown_room")
}

// TestDirectivesRedisDown: without Redis the document is a 503 problem
// that no cache keeps (no-store), never an empty document a verifier would
// take for "no stop".
func TestDirectivesRedisDown(t *testing.T) {
	e := newEnv(t, privateRedis())
	require.NoError(t, e.rdb.Close())
	r := e.do(req{method: "GET", path: "/.well-known/flashgate-directives.json"})
	r.problem(t, 503, "unavailable")
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
}
