package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// limitedFor asserts a 429 rate_limited answer of route with a Retry-After
// of 1 … max seconds.
func limitedFor(t *testing.T, r resp, route string, max time.Duration) {
	t.Helper()
	m := r.problem(t, 429, "rate_limited")
	assert.Contains(t, m["detail"], route)
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.header.Get("Retry-After"))
	assert.True(t, ra >= 1 && ra <= int(max/time.Second), "Retry-After %d", ra)
}

// TestUserLimits: status, exchange, leave and complete each have a per-user
// budget per window; other users and other routes are not affected.
func TestUserLimits(t *testing.T) {
	const window = 10 * time.Second
	e := newEnv(t, privateRedis(), withOptions(func(o *Options) {
		o.EnterWindow = window
		o.StatusPerUser, o.ExchangePerUser, o.LeavePerUser, o.CompletePerUser = 3, 2, 2, 2
	}))
	room := e.room(issuer.RoomConfig{Capacity: 10})
	alice := e.enter(room, "alice")["waiting_token"].(string)
	bob := e.enter(room, "bob")["waiting_token"].(string)
	status := func(user, tok string) resp {
		return e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: user, bearer: tok})
	}
	for range 3 {
		require.Equal(t, 200, status("alice", alice).status)
	}
	e.unchanged("a rate-limited status", func() { limitedFor(t, status("alice", alice), "status", window) })
	require.Equal(t, 200, status("bob", bob).status, "another user")

	// Exchange: the admission token; a repeated exchange answers the same one.
	x := e.exchange(room, "alice", alice)
	require.Equal(t, 200, x.status, "%s", x.body)
	tok := x.json(t)["admission_token"].(string)
	require.Equal(t, 200, e.exchange(room, "alice", alice).status)
	limitedFor(t, e.exchange(room, "alice", alice), "exchange", window)
	xb := e.exchange(room, "bob", bob)
	require.Equal(t, 200, xb.status)

	// Complete: keyed on the admission token's sub.
	complete := func(tok string) resp {
		return e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: tok})
	}
	require.Equal(t, 200, complete(tok).status)
	require.Equal(t, 200, complete(tok).status) // repeated: idempotent
	limitedFor(t, complete(tok), "complete", window)
	require.Equal(t, 200, complete(xb.json(t)["admission_token"].(string)).status, "another user")
	// Not a token: refused by the handler and counted against the client
	// address, never against a user.
	for range 2 {
		complete("junk").problem(t, 401, "invalid_admission_token")
	}
	limitedFor(t, complete("junk"), "client address", window)

	// Leave.
	carol := e.enter(room, "carol")["waiting_token"].(string)
	leave := func() resp {
		return e.do(req{method: "POST", path: "/v1/rooms/" + room + "/leave", user: "carol", bearer: carol})
	}
	require.Equal(t, 204, leave().status)
	require.Equal(t, 404, leave().status) // left already: still counted
	limitedFor(t, leave(), "leave", window)
	// Enter has its own limits (none here).
	require.Equal(t, 200, e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "carol"}).status)
}

// TestUserLimitsVisitorMode: in visitor mode the key is the visitor cookie;
// a request without one is not counted (the handler answers it).
func TestUserLimitsVisitorMode(t *testing.T) {
	const window = 10 * time.Second
	e := newEnv(t, privateRedis(), withOptions(func(o *Options) {
		o.Identity, o.VisitorKey, o.InsecureCookies = IdentityVisitor, []byte("0123456789abcdef0123456789abcdef"), true
		o.EnterWindow, o.StatusPerUser = window, 2
	}))
	room := e.room(issuer.RoomConfig{Capacity: 10})
	r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter"})
	require.Equal(t, 200, r.status)
	var cookie string
	for _, c := range r.header.Values("Set-Cookie") {
		if len(c) > len(VisitorCookie) && c[:len(VisitorCookie)+1] == VisitorCookie+"=" {
			cookie = c[:len(VisitorCookie)+1+visitorCookieLen]
		}
	}
	require.NotEmpty(t, cookie)
	tok := r.json(t)["waiting_token"].(string)
	status := func() resp {
		return e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", bearer: tok, hdr: map[string]string{"Cookie": cookie}})
	}
	require.Equal(t, 200, status().status)
	require.Equal(t, 200, status().status)
	limitedFor(t, status(), "status", window)
}

// TestUserLimitDefaultsAbovePolling: a client polling at the shortest poll
// hint (1 s, jittered down to 0.8 s) sends 12.5 statuses per window; the
// defaults leave room for several tabs, and each once-per-admission call
// for its retries at that hint.
func TestUserLimitDefaultsAbovePolling(t *testing.T) {
	perWindow := float64(DefaultEnterWindow) / float64(800*time.Millisecond)
	assert.Greater(t, float64(DefaultStatusPerUser), 4*perWindow)
	for _, n := range []int{DefaultExchangePerUser, DefaultLeavePerUser, DefaultCompletePerUser} {
		assert.Greater(t, float64(n), perWindow)
	}
}

// TestAdminFailuresThrottled: AdminFailuresPerAddress failed admin
// authentications from one address, then 429 with Retry-After for every
// admin request from it, the right token too; other addresses unaffected.
func TestAdminFailuresThrottled(t *testing.T) {
	e := newEnv(t, withOptions(behindProxy))
	admin := func(addr, tok string) resp {
		return e.do(req{method: "GET", path: "/admin/rooms", bearer: tok, hdr: map[string]string{"X-Real-IP": addr}})
	}
	require.Equal(t, 200, admin("192.0.2.1", adminToken).status, "successes do not count")
	for i := range AdminFailuresPerAddress {
		admin("192.0.2.1", "guess-"+strconv.Itoa(i)).problem(t, 401, "admin_unauthorized")
	}
	for _, tok := range []string{"guess-x", adminToken} {
		r := admin("192.0.2.1", tok)
		m := r.problem(t, 429, "rate_limited")
		assert.Contains(t, m["detail"], "admin")
		ra, err := strconv.Atoi(r.header.Get("Retry-After"))
		require.NoError(t, err)
		assert.True(t, ra >= 1 && ra <= int(AdminFailureWindow/time.Second), "Retry-After %d", ra)
	}
	// The same /64's other addresses share the budget; another address not.
	require.Equal(t, 200, admin("192.0.2.2", adminToken).status)
	admin("192.0.2.2", "guess").problem(t, 401, "admin_unauthorized")
}

func TestAdminFailureWindowEnds(t *testing.T) {
	w := newWindowCounter(2, time.Minute)
	now := time.Unix(1000, 0)
	w.now = func() time.Time { return now }
	w.add("a")
	_, full := w.full("a")
	assert.False(t, full)
	w.add("a")
	retry, full := w.full("a")
	assert.True(t, full)
	assert.Equal(t, time.Minute, retry)
	now = now.Add(59500 * time.Millisecond)
	retry, full = w.full("a")
	assert.True(t, full)
	assert.Equal(t, time.Second, retry, "rounded up to whole seconds")
	now = now.Add(500 * time.Millisecond)
	_, full = w.full("a")
	assert.False(t, full, "a new window")
	_, ok := w.take("a")
	assert.True(t, ok)
	_, ok = w.take("a")
	assert.True(t, ok)
	_, ok = w.take("a")
	assert.False(t, ok)
	assert.Len(t, w.m, 1)
	now = now.Add(2 * time.Minute)
	w.add("b")
	assert.Len(t, w.m, 1, "expired keys are swept")
}

// TestAutoRoomsPerAddress: enters that create a room (DefaultRoom) count
// against the client address's budget; rooms that exist never do.
func TestAutoRoomsPerAddress(t *testing.T) {
	e := newEnv(t, privateRedis(), withIssuer(func(c *issuer.Config) {
		c.DefaultRoom = &issuer.RoomConfig{Capacity: 10, State: issuer.RoomOpen}
	}), withOptions(behindProxy, func(o *Options) { o.AutoRoomsPerAddress = 2 }))
	existing := e.room(issuer.RoomConfig{Capacity: 10})
	r1, r2, r3 := existing+"-a", existing+"-b", existing+"-c"
	require.Equal(t, 200, e.enterAs(r1, "u1", "2001:db8:9:9::1").status)
	require.Equal(t, 200, e.enterAs(r2, "u1", "2001:db8:9:9::2").status)
	e.unchanged("a refused room creation", func() {
		r := e.enterAs(r3, "u1", "2001:db8:9:9::3")
		m := r.problem(t, 429, "rate_limited")
		assert.Contains(t, m["detail"], "new rooms")
		ra, err := strconv.Atoi(r.header.Get("Retry-After"))
		require.NoError(t, err)
		assert.True(t, ra > 3500 && ra <= 3600, "Retry-After %d", ra)
		// The waiting page creates rooms too.
		e.do(req{method: "GET", path: "/wait/" + r3, hdr: map[string]string{"X-Real-IP": "2001:db8:9:9::4"}})
	})
	// Rooms that exist: not counted, from the same address.
	for _, room := range []string{r1, r2, existing} {
		require.Equal(t, 200, e.enterAs(room, "u2", "2001:db8:9:9::1").status, room)
	}
	// Another address creates r3.
	require.Equal(t, 200, e.enterAs(r3, "u1", "198.51.100.3").status)
}

// TestUserLimitKeysAreCopies: the limiter keeps its key past the request
// (invariant 7), and the key may alias the request's buffer (the user
// header): fiber's memory storage must copy it, or the poisoned key would
// never match again and the user would never reach the limit.
func TestUserLimitKeysAreCopies(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.StatusPerUser = 2 }))
	e.srv.afterRequest = poison
	room := e.room(issuer.RoomConfig{Capacity: 1})
	tok := e.enter(room, "alice")["waiting_token"].(string)
	status := func() resp {
		return e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "alice", bearer: tok})
	}
	require.Equal(t, 200, status().status)
	require.Equal(t, 200, status().status)
	limitedFor(t, status(), "status", DefaultEnterWindow)
}

// TestEventsCountAgainstStatusLimit (issue 31 §3): every event stream open
// runs the status a poll runs, so it counts against the same per-user
// budget: opening and closing a stream 150 times runs 60 statuses, not
// 150, and /status is refused past them too.
func TestEventsCountAgainstStatusLimit(t *testing.T) {
	e := newEnv(t, privateRedis(), withOptions(func(o *Options) {
		o.EnterWindow, o.StatusPerUser = time.Hour, DefaultStatusPerUser
	}))
	base := strings.TrimPrefix(e.listen(), "http://")
	room := e.room(issuer.RoomConfig{Capacity: 1})
	e.enter(room, "alice")
	tok := e.enter(room, "bob")["waiting_token"].(string)
	open := func() int {
		conn, err := net.Dial("tcp", base)
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprintf(conn, "GET /v1/rooms/%s/events?waiting_token=%s HTTP/1.1\r\nHost: x\r\nX-User-ID: bob\r\n\r\n", room, tok)
		require.NoError(t, err)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		return res.StatusCode
	}
	counts := map[int]int{}
	for range 150 {
		counts[open()]++
	}
	assert.Equal(t, map[int]int{200: DefaultStatusPerUser, 429: 150 - DefaultStatusPerUser}, counts)
	limitedFor(t, e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "bob", bearer: tok}), "status", time.Hour)
	// Another user's budget is its own.
	require.Equal(t, 200, e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "alice",
		bearer: e.enter(room, "alice")["waiting_token"].(string)}).status)
}

// TestCompleteLimitJunkNamingAUser (issue 31 §3): the completion limit is
// counted once the token is verified, so junk tokens naming a user spend
// the sender's address's budget, never that user's; the user's own
// verified completions still have their budget.
func TestCompleteLimitJunkNamingAUser(t *testing.T) {
	e := newEnv(t, privateRedis(), withOptions(behindProxy, func(o *Options) {
		o.EnterWindow, o.CompletePerUser = time.Hour, DefaultCompletePerUser
	}))
	room := e.room(issuer.RoomConfig{Capacity: 10})
	wt := e.enter(room, "victim")["waiting_token"].(string)
	x := e.exchange(room, "victim", wt)
	require.Equal(t, 200, x.status, "%s", x.body)
	tok := x.json(t)["admission_token"].(string)
	// The victim's claims, a signature that is not the issuer's.
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	forged := tok[:len(tok)-len(sig)] + strings.Repeat("A", len(sig))
	complete := func(tok, addr string) resp {
		return e.do(req{method: "POST", path: "/v1/complete?room=" + room, bearer: tok,
			hdr: map[string]string{"X-Real-IP": addr}})
	}
	for range DefaultCompletePerUser {
		complete(forged, "203.0.113.66").problem(t, 401, "invalid_admission_token")
	}
	limitedFor(t, complete(forged, "203.0.113.66"), "client address", time.Hour)
	limitedFor(t, complete(tok, "203.0.113.66"), "client address", time.Hour) // that address's budget is spent
	// Another address: the junk is refused, not limited; the victim completes.
	complete(forged, "203.0.113.67").problem(t, 401, "invalid_admission_token")
	r := complete(tok, "198.51.100.5")
	require.Equal(t, 200, r.status, "%s", r.body)
	// The victim's own completions: DefaultCompletePerUser, then 429.
	for range DefaultCompletePerUser - 1 {
		require.Equal(t, 200, complete(tok, "198.51.100.5").status)
	}
	limitedFor(t, complete(tok, "198.51.100.6"), "user", time.Hour)
}
