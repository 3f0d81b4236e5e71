package server

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

// enterAs enters room as user from client address addr (the X-Real-IP
// header; "" sends none).
func (e *env) enterAs(room, user, addr string) resp {
	e.t.Helper()
	r := req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: user}
	if addr != "" {
		r.hdr = map[string]string{"X-Real-IP": addr}
	}
	return e.do(r)
}

// limited asserts a 429 rate_limited answer of enter with a Retry-After
// within the window.
func limited(t *testing.T, r resp, window time.Duration) {
	t.Helper()
	limitedFor(t, r, "enter", window)
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
}

// behindProxy trusts X-Real-IP from app.Test's peer address (0.0.0.0).
func behindProxy(o *Options) {
	o.ProxyHeader, o.TrustedProxies = "X-Real-IP", []string{"0.0.0.0"}
}

func TestEnterRateLimitPerUser(t *testing.T) {
	const window = 10 * time.Second
	e := newEnv(t, privateRedis(), withOptions(behindProxy, func(o *Options) { o.EnterPerUser, o.EnterWindow = 3, window }))
	room := e.room(issuer.RoomConfig{Capacity: 1})

	var tok string
	for i := range 3 {
		r := e.enterAs(room, "alice", "192.0.2.1")
		require.Equal(t, 200, r.status, "enter %d: %s", i, r.body)
		tok = r.json(t)["waiting_token"].(string)
	}
	// The fourth is refused, from any address, and reaches no handler.
	other := e.room(issuer.RoomConfig{})
	e.unchanged("rate-limited enters", func() {
		limited(t, e.enterAs(room, "alice", "192.0.2.1"), window)
		limited(t, e.enterAs(room, "alice", "198.51.100.7"), window)
		limited(t, e.enterAs(room, "alice", ""), window)
		// Even in another room: the budget is per user.
		limited(t, e.enterAs(other, "alice", "192.0.2.1"), window)
	})
	// Other users, from the same address, are not affected.
	for _, u := range []string{"bob", "carol"} {
		r := e.enterAs(room, u, "192.0.2.1")
		require.Equal(t, 200, r.status, "%s: %s", u, r.body)
	}
	// Only enter is limited: alice still polls, exchanges, leaves.
	r := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "alice", bearer: tok})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "ACTIVE", r.json(t)["state"])
	require.Equal(t, 200, e.exchange(room, "alice", tok).status)

	// Requests without a (valid) user id are refused by the handler, never
	// counted under a shared empty key.
	for range 5 {
		e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter"}).problem(t, 401, "missing_user")
		e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "a{b}"}).problem(t, 400, "invalid_input")
	}
}

func TestEnterRateLimitPerAddress(t *testing.T) {
	const window = 10 * time.Second
	e := newEnv(t, privateRedis(), withOptions(behindProxy, func(o *Options) { o.EnterPerAddress, o.EnterWindow = 3, window }))
	room := e.room(issuer.RoomConfig{Capacity: 1})

	for _, u := range []string{"u1", "u2", "u3"} {
		r := e.enterAs(room, u, "203.0.113.7")
		require.Equal(t, 200, r.status, "%s: %s", u, r.body)
	}
	e.unchanged("rate-limited enters", func() {
		limited(t, e.enterAs(room, "u4", "203.0.113.7"), window)
		limited(t, e.enterAs(room, "u1", "203.0.113.7"), window)
	})
	// The same users from other addresses are not affected: the limit is
	// per address, and no per-user limit is configured.
	for _, u := range []string{"u4", "u1"} {
		r := e.enterAs(room, u, "203.0.113.8")
		require.Equal(t, 200, r.status, "%s: %s", u, r.body)
	}
	// An IPv6 client and a header that holds no valid address (the peer's
	// address counts then).
	require.Equal(t, 200, e.enterAs(room, "u5", "2001:db8::1").status)
	require.Equal(t, 200, e.enterAs(room, "u6", "not-an-ip").status)
}

func TestEnterRateLimitUserFirst(t *testing.T) {
	// A user hammering from a shared address exhausts its own budget, not
	// the address's: the per-user limiter refuses before the per-address
	// one counts.
	const window = 10 * time.Second
	e := newEnv(t, privateRedis(), withOptions(behindProxy, func(o *Options) {
		o.EnterPerUser, o.EnterPerAddress, o.EnterWindow = 2, 4, window
	}))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	for i := range 10 {
		r := e.enterAs(room, "bot", "198.51.100.1")
		if i < 2 {
			require.Equal(t, 200, r.status, "%s", r.body)
		} else {
			limited(t, r, window)
		}
	}
	for _, u := range []string{"ann", "ben"} {
		require.Equal(t, 200, e.enterAs(room, u, "198.51.100.1").status, u)
	}
	limited(t, e.enterAs(room, "cid", "198.51.100.1"), window)
	require.Equal(t, 200, e.enterAs(room, "cid", "198.51.100.2").status)
}

func TestEnterRateLimitUntrustedPeer(t *testing.T) {
	// The header is believed only from a trusted proxy: from any other
	// peer, every request has the peer's address, whatever it claims.
	const window = 10 * time.Second
	e := newEnv(t, privateRedis(), withOptions(func(o *Options) {
		o.ProxyHeader, o.TrustedProxies = "X-Real-IP", []string{"10.0.0.0/8"}
		o.EnterPerAddress, o.EnterWindow = 2, window
	}))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	require.Equal(t, 200, e.enterAs(room, "u1", "192.0.2.1").status)
	require.Equal(t, 200, e.enterAs(room, "u2", "192.0.2.2").status)
	limited(t, e.enterAs(room, "u3", "192.0.2.3"), window)
}

// TestEnterRateLimitOverTCP: over a real connection from a trusted proxy
// (127.0.0.1) that appends the address it saw to X-Forwarded-For, a client
// that writes a new entry of its own per request still has the appended one.
func TestEnterRateLimitOverTCP(t *testing.T) {
	const window = 10 * time.Second
	e := newEnv(t, privateRedis(), withOptions(func(o *Options) {
		o.ProxyHeader, o.TrustedProxies = "X-Forwarded-For", []string{"127.0.0.1", "::1"}
		o.EnterPerAddress, o.EnterWindow = 2, window
	}))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	base := e.listen()
	post := func(user string, xff ...string) resp {
		hr, err := http.NewRequest("POST", base+"/v1/rooms/"+room+"/enter", nil)
		require.NoError(t, err)
		hr.Header.Set("X-User-ID", user)
		for _, v := range xff {
			hr.Header.Add("X-Forwarded-For", v)
		}
		res, err := http.DefaultClient.Do(hr)
		require.NoError(t, err)
		return readResp(t, res)
	}
	require.Equal(t, 200, post("u1", "203.0.113.50, 192.0.2.1").status)
	require.Equal(t, 200, post("u2", "203.0.113.51, 192.0.2.1").status)
	limited(t, post("u3", "203.0.113.52, 192.0.2.1"), window)
	limited(t, post("u4", "203.0.113.53", "192.0.2.1"), window) // two header lines
	limited(t, post("u4", "192.0.2.1"), window)
	// The right-most untrusted entry counts, never the client-written left.
	require.Equal(t, 200, post("u5", "192.0.2.1, 192.0.2.2").status)
}

func TestEnterRateLimitWindowResets(t *testing.T) {
	e := newEnv(t, privateRedis(), withOptions(func(o *Options) { o.EnterPerUser, o.EnterWindow = 1, time.Second }))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	require.Equal(t, 200, e.enterAs(room, "alice", "").status)
	r := e.enterAs(room, "alice", "")
	// A window boundary may fall between two requests (fiber's limiter clock
	// ticks in whole seconds): then the second is the new window's first.
	for i := 0; r.status == 200 && i < 3; i++ {
		r = e.enterAs(room, "alice", "")
	}
	limited(t, r, time.Second)
	ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
	// fiber's limiter clock ticks in whole seconds: allow one more.
	deadline := time.Now().Add(time.Duration(ra+2) * time.Second)
	for {
		if r = e.enterAs(room, "alice", ""); r.status == 200 {
			break
		}
		require.True(t, time.Now().Before(deadline), "still limited after Retry-After: %s", r.body)
		time.Sleep(100 * time.Millisecond)
	}
}

func TestEnterRateLimitDisabled(t *testing.T) {
	// Options' zero values: no limit.
	e := newEnv(t, privateRedis())
	room := e.room(issuer.RoomConfig{Capacity: 1})
	for range 50 {
		r := e.enterAs(room, "alice", "")
		require.Equal(t, 200, r.status, "%s", r.body)
		assert.Empty(t, r.header.Get("X-RateLimit-Limit"))
	}
	// 0 disables one limiter and keeps the other.
	e = newEnv(t, privateRedis(), withOptions(behindProxy, func(o *Options) { o.EnterPerUser, o.EnterPerAddress = 0, 2 }))
	room = e.room(issuer.RoomConfig{Capacity: 1})
	require.Equal(t, 200, e.enterAs(room, "alice", "192.0.2.9").status)
	require.Equal(t, 200, e.enterAs(room, "alice", "192.0.2.9").status)
	limited(t, e.enterAs(room, "alice", "192.0.2.9"), DefaultEnterWindow)
	require.Equal(t, 200, e.enterAs(room, "alice", "").status) // the peer, 0.0.0.0, has its own budget
}

func TestRateLimitOptionsValidate(t *testing.T) {
	rdbEnv := newEnv(t, privateRedis())
	base := Options{Issuer: rdbEnv.is, Keys: rdbEnv.ring, Logger: quietLog}
	for name, mod := range map[string]func(*Options){
		"proxy header without trusted proxies": func(o *Options) { o.ProxyHeader = "X-Real-IP" },
		"bad trusted proxy":                    func(o *Options) { o.ProxyHeader, o.TrustedProxies = "X-Real-IP", []string{"gateway"} },
		"bad CIDR":                             func(o *Options) { o.ProxyHeader, o.TrustedProxies = "X-Real-IP", []string{"10.0.0.0/33"} },
		"negative per user":                    func(o *Options) { o.EnterPerUser = -1 },
		"negative per address":                 func(o *Options) { o.EnterPerAddress = -1 },
		"negative window":                      func(o *Options) { o.EnterWindow = -time.Second },
		"negative status limit":                func(o *Options) { o.StatusPerUser = -1 },
		"negative complete limit":              func(o *Options) { o.CompletePerUser = -1 },
		"negative auto-room limit":             func(o *Options) { o.AutoRoomsPerAddress = -1 },
		"negative auto-room window":            func(o *Options) { o.AutoRoomWindow = -time.Second },
		"IPv4 prefix over 32":                  func(o *Options) { o.AddressPrefixV4 = 33 },
		"IPv6 prefix over 128":                 func(o *Options) { o.AddressPrefixV6 = 129 },
		"zoned trusted proxy":                  func(o *Options) { o.ProxyHeader, o.TrustedProxies = "X-Real-IP", []string{"fe80::1%eth0"} },
	} {
		o := base
		mod(&o)
		_, err := New(o)
		assert.Error(t, err, name)
	}
	o := base
	o.ProxyHeader, o.TrustedProxies = "CF-Connecting-IP", []string{"10.0.0.0/8", " 192.0.2.1 ", "::ffff:198.51.100.1", "2001:db8::/32"}
	o.EnterPerUser, o.EnterPerAddress = DefaultEnterPerUser, DefaultEnterPerAddress
	_, err := New(o)
	assert.NoError(t, err)
}

func TestRateLimitedInProblemTable(t *testing.T) {
	require.True(t, problem.Known(problem.RateLimited))
	assert.Equal(t, 429, problem.Lookup(problem.RateLimited).Status)
}
