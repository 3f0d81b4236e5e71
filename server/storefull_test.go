package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/logtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// TestStoreFullOverHTTP: Redis over maxmemory. A new entry is refused with
// its own problem, store_full (503, Retry-After), counted in
// flashgate_store_errors_total and not logged per request; /readyz says not
// ready with the reason, logged once; status, completion and leave work.
//
// It would fail if OOM were answered as the generic unavailable (or as an
// unmapped 500), if /readyz only pinged (PING works over maxmemory), or if
// the completion or leave script wrote with a deny-oom command first.
func TestStoreFullOverHTTP(t *testing.T) {
	rdb := redistest.Start(t).Client(t) // CONFIG SET: never on a shared server
	ring := newTestRing(t)
	logs, log := logtest.New()
	is := newIssuer(t, rdb, ring)
	srv, err := New(Options{Issuer: is, Keys: ring, AdminToken: adminToken, Logger: log})
	require.NoError(t, err)
	e := &env{t: t, rdb: rdb, is: is, ring: ring, srv: srv}
	room := e.room(issuer.RoomConfig{Capacity: 1})
	alice := e.admitted(room, "alice")
	bob := e.enter(room, "bob")
	require.Equal(t, "WAITING", bob["state"])
	bobTok := bob["waiting_token"].(string)
	require.Equal(t, 200, e.do(req{method: "GET", path: "/readyz"}).status)

	ctx := context.Background()
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err()) // any data is over it
	t.Cleanup(func() { _ = rdb.ConfigSet(ctx, "maxmemory", "0").Err() })

	for range 3 {
		r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "carol"})
		r.problem(t, 503, "store_full")
		assert.Equal(t, "5", r.header.Get("Retry-After"))
		assert.NotContains(t, string(r.body), "OOM", "Redis's text stays inside")
	}
	p := e.do(req{method: "GET", path: "/readyz"}).problem(t, 503, "not_ready")
	assert.Contains(t, p["detail"], "full")
	e.do(req{method: "GET", path: "/readyz"}).problem(t, 503, "not_ready")

	r := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "bob", bearer: bobTok})
	assert.Equal(t, 200, r.status, "status reads only: %s", r.body)
	r = e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: alice.AdmissionToken})
	assert.Equal(t, 200, r.status, "completion frees memory: %s", r.body)
	r = e.do(req{method: "POST", path: "/v1/rooms/" + room + "/leave", user: "bob", bearer: bobTok})
	assert.Equal(t, 204, r.status, "leave frees memory: %s", r.body)

	m := string(e.do(req{method: "GET", path: "/metrics"}).body)
	assert.Contains(t, m, `flashgate_store_errors_total{code="store_full"} 3`)
	assert.Contains(t, m, `flashgate_store_errors_total{code="unavailable"} 0`)

	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "0").Err())
	assert.Equal(t, 200, e.do(req{method: "GET", path: "/readyz"}).status)
	e.enter(room, "carol")

	assert.Equal(t, []string{"WARN not ready", "INFO ready again"}, logs.Lines(),
		"readiness changes are logged once each; refused enters are counted, not logged")
}
