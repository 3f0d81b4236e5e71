package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

const shopOrigin = "https://shop.example"

func corsEnv(t *testing.T) *env {
	return newEnv(t, withOptions(func(o *Options) {
		o.CORSOrigins = []string{"https://Shop.example:443", "http://localhost:3000"}
		o.UserHeader = "X-Shopper"
	}))
}

// noCORS asserts that r carries no CORS header.
func noCORS(t *testing.T, r resp, what string) {
	t.Helper()
	for _, h := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials",
		"Access-Control-Expose-Headers", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers",
		"Access-Control-Max-Age"} {
		assert.Empty(t, r.header.Get(h), "%s: %s", what, h)
	}
}

// varies reports whether r's Vary header names h.
func varies(r resp, h string) bool {
	for _, v := range r.header.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), h) {
				return true
			}
		}
	}
	return false
}

func preflight(e *env, path, origin string) resp {
	return e.do(req{method: "OPTIONS", path: path, hdr: map[string]string{
		"Origin": origin, "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "content-type, x-shopper"}})
}

func TestCORSPreflight(t *testing.T) {
	room := "sku-cors"
	path := "/v1/rooms/" + room + "/enter"

	// Without CORSOrigins a preflight is just an unsupported method.
	plain := newEnv(t)
	r := preflight(plain, path, shopOrigin)
	r.problem(t, 405, problem.MethodNotAllowed)
	noCORS(t, r, "CORS off")

	e := corsEnv(t)
	for _, origin := range []string{shopOrigin, "http://localhost:3000"} {
		for _, p := range []string{path, "/v1/rooms/" + room + "/status", "/v1/complete"} {
			r := preflight(e, p, origin)
			require.Equal(t, 204, r.status, "%s %s: %s", origin, p, r.body)
			assert.Equal(t, origin, r.header.Get("Access-Control-Allow-Origin"))
			assert.Equal(t, "true", r.header.Get("Access-Control-Allow-Credentials"))
			assert.Equal(t, "GET, POST", r.header.Get("Access-Control-Allow-Methods"))
			assert.Equal(t, "Authorization, Content-Type, X-Shopper", r.header.Get("Access-Control-Allow-Headers"))
			assert.Equal(t, "600", r.header.Get("Access-Control-Max-Age"))
			assert.True(t, varies(r, "Origin"), "Vary: %q", r.header.Values("Vary"))
			assert.Empty(t, r.body)
		}
	}

	// An unlisted Origin: 403 problem, no CORS header.
	for _, origin := range []string{"https://evil.example", "https://shop.example.evil.example", "http://shop.example",
		"https://shop.example:8443", "null", "https://shop.example/", "https://shop.example@evil.example"} {
		r := preflight(e, path, origin)
		r.problem(t, 403, problem.CORSOriginRefused)
		noCORS(t, r, origin)
	}
	// A preflight without Origin is refused too; an OPTIONS that is no
	// preflight is still 405.
	preflight(e, path, "").problem(t, 403, problem.CORSOriginRefused)
	r = e.do(req{method: "OPTIONS", path: path, hdr: map[string]string{"Origin": shopOrigin}})
	r.problem(t, 405, problem.MethodNotAllowed)
	noCORS(t, r, "OPTIONS without Access-Control-Request-Method")

	// Not on /admin.
	r = e.do(req{method: "OPTIONS", path: "/admin/rooms", hdr: map[string]string{
		"Origin": shopOrigin, "Access-Control-Request-Method": "GET"}})
	r.problem(t, 405, problem.MethodNotAllowed)
	noCORS(t, r, "admin preflight")
}

func TestCORSRequests(t *testing.T) {
	e := corsEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1, RatePerMinute: 60})

	enter := func(user, origin string) resp {
		r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter",
			hdr: map[string]string{"X-Shopper": user, "Origin": origin}})
		return r
	}
	// A listed origin: the answer carries its CORS headers, Retry-After exposed.
	r := enter("alice", shopOrigin)
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, shopOrigin, r.header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "true", r.header.Get("Access-Control-Allow-Credentials"))
	assert.Equal(t, "Retry-After, Flashgate-Beacon", r.header.Get("Access-Control-Expose-Headers"))
	assert.True(t, varies(r, "Origin"), "Vary: %q", r.header.Values("Vary"))
	assert.Empty(t, r.header.Get("Access-Control-Allow-Methods"), "only preflights list methods")

	// Problems carry them too, so that the page can read the code.
	r = e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", hdr: map[string]string{"Origin": "http://localhost:3000"}})
	r.problem(t, 401, problem.MissingUser)
	assert.Equal(t, "http://localhost:3000", r.header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "true", r.header.Get("Access-Control-Allow-Credentials"))

	// An unlisted origin, or none: no CORS headers, the request itself is
	// answered as ever (CORS is the browser's to enforce), Vary: Origin.
	for _, origin := range []string{"https://evil.example", ""} {
		r := enter("bob", origin)
		require.Equal(t, 200, r.status, "%s", r.body)
		noCORS(t, r, origin)
		assert.True(t, varies(r, "Origin"), "%s: Vary: %q", origin, r.header.Values("Vary"))
	}

	// Not on /admin, nor on the operational routes.
	for _, p := range []string{"/admin/rooms", "/healthz", "/.well-known/jwks.json"} {
		r := e.do(req{method: "GET", path: p, bearer: adminToken, hdr: map[string]string{"Origin": shopOrigin}})
		noCORS(t, r, p)
	}
}
