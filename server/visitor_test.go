package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
)

var testVisitorKey = bytes.Repeat([]byte("k"), MinVisitorKey)

// visitorMode turns visitor identity on, with mod applied after.
func visitorMode(mod ...func(*Options)) envOption {
	return withOptions(append([]func(*Options){func(o *Options) {
		o.Identity, o.VisitorKey = IdentityVisitor, testVisitorKey
	}}, mod...)...)
}

// cookies returns the response's Set-Cookie cookies by name.
func (r resp) cookies() map[string]*http.Cookie {
	out := map[string]*http.Cookie{}
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		out[c.Name] = c
	}
	return out
}

var visitorValue = regexp.MustCompile(`^[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{22}$`)

// visitorCookie asserts a fresh visitor cookie on r and returns its value.
func visitorCookie(t *testing.T, r resp, secure bool) string {
	t.Helper()
	return visitorCookieAs(t, r, visitorCookieName(secure, ""), secure)
}

// visitorCookieAs is visitorCookie for the cookie called name.
func visitorCookieAs(t *testing.T, r resp, name string, secure bool) string {
	t.Helper()
	c := r.cookies()[name]
	require.NotNil(t, c, "no %s cookie: %v", name, r.header["Set-Cookie"])
	assert.Regexp(t, visitorValue, c.Value)
	assert.Equal(t, "/", c.Path)
	assert.Empty(t, c.Domain)
	assert.True(t, c.HttpOnly)
	assert.Equal(t, secure, c.Secure)
	assert.Equal(t, http.SameSiteLaxMode, c.SameSite)
	assert.Equal(t, int(VisitorMaxAge/time.Second), c.MaxAge)
	return c.Value
}

func withCookie(name, value string) map[string]string {
	return map[string]string{"Cookie": name + "=" + value}
}

// waitingUsers returns room's waiting line (user ids) from Redis.
func (e *env) waitingUsers(room string) []string {
	e.t.Helper()
	us, err := e.rdb.ZRange(context.Background(), roomKey(room, "waiting"), 0, -1).Result()
	require.NoError(e.t, err)
	return us
}

func TestVisitorIdentity(t *testing.T) {
	e := newEnv(t, visitorMode())
	room := e.room(issuer.RoomConfig{Capacity: 1})
	_, err := e.is.Enter(context.Background(), room, "holder") // takes the one place
	require.NoError(t, err)
	enter := "/v1/rooms/" + room + "/enter"

	// First contact: a cookie and a WAITING entry under "v_<id>"; the user
	// header is not trusted.
	r := e.do(req{method: "POST", path: enter, user: "mallory"})
	require.Equal(t, 200, r.status, "%s", r.body)
	tab1 := r.json(t)
	assert.Equal(t, "WAITING", tab1["state"])
	assert.EqualValues(t, 1, tab1["position"])
	v1 := visitorCookie(t, r, true)
	u1 := VisitorPrefix + v1[:22]
	assert.True(t, issuer.ValidID(u1))
	assert.Equal(t, []string{u1}, e.waitingUsers(room))

	// A second tab of the same browser: same place, no new cookie.
	r = e.do(req{method: "POST", path: enter, hdr: withCookie(VisitorHostCookie, v1)})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Empty(t, r.header.Values("Set-Cookie"))
	tab2 := r.json(t)
	assert.Equal(t, tab1["waiting_token"], tab2["waiting_token"])
	assert.Equal(t, tab1["position"], tab2["position"])
	tok := tab1["waiting_token"].(string)
	r = e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", bearer: tok, hdr: withCookie(VisitorHostCookie, v1)})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.EqualValues(t, 1, r.json(t)["position"])

	// Another cookie jar: its own place.
	r = e.do(req{method: "POST", path: enter})
	require.Equal(t, 200, r.status, "%s", r.body)
	v2 := visitorCookie(t, r, true)
	assert.NotEqual(t, v1, v2)
	assert.EqualValues(t, 2, r.json(t)["position"])

	// Without the cookie, the first visitor's waiting token is another
	// user's, even with the visitor's user id in the (ignored) user header.
	r = e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", bearer: tok, user: u1})
	r.problem(t, 403, "token_owner_mismatch")
	visitorCookie(t, r, true) // a fresh visitor, even on an error answer

	// Forged, garbled, oversized cookies are replaced, never trusted.
	otherKey := &visitors{key: bytes.Repeat([]byte("x"), MinVisitorKey)}
	_, foreign := otherKey.mint()
	flip := []byte(v1)
	flip[len(flip)-2] ^= 1 // a bad MAC
	for name, bad := range map[string]string{
		"foreign key":  foreign,
		"bad mac":      string(flip),
		"swapped id":   v2[:22] + v1[22:],
		"garbage":      "not-a-cookie",
		"bad base64":   strings.Repeat("!", 22) + "." + strings.Repeat("!", 22),
		"oversized":    v1 + strings.Repeat("A", 3000),
		"no separator": strings.Replace(v1, ".", "A", 1),
	} {
		r := e.do(req{method: "POST", path: enter, hdr: withCookie(VisitorHostCookie, bad)})
		require.Equal(t, 200, r.status, "%s: %s", name, r.body)
		fresh := visitorCookie(t, r, true)
		assert.NotEqual(t, bad, fresh, name)
		assert.NotEqual(t, tab1["waiting_token"], r.json(t)["waiting_token"], name)
	}
	line := e.waitingUsers(room)
	assert.Len(t, line, 2+7) // v1, v2 and one fresh visitor per bad cookie
	for _, u := range line {
		assert.Regexp(t, `^v_[A-Za-z0-9_-]{22}$`, u)
		assert.True(t, issuer.ValidID(u))
	}
	assert.False(t, slices.Contains(line, "mallory"))
	assert.True(t, slices.Contains(line, u1))
	assert.True(t, slices.Contains(line, VisitorPrefix+v2[:22]))
}

func TestVisitorCheckRejectsNonCanonicalIDs(t *testing.T) {
	v := &visitors{key: testVisitorKey}
	id, value := v.mint()
	got, ok := v.check(value)
	require.True(t, ok)
	assert.Equal(t, id, got)
	// The last character of a 16-byte base64url id carries 4 unused bits:
	// a variant spelling of the same bytes (same MAC) is refused, so one
	// cookie cannot be turned into several user ids.
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, id[21])
	variant := id[:21] + string(alphabet[i|1]) + value[22:]
	if i|1 == i {
		variant = id[:21] + string(alphabet[i&^1]) + value[22:]
	}
	_, ok = v.check(variant)
	assert.False(t, ok)
	for _, bad := range []string{"", value + "A", value[:44], strings.ToUpper(value)} {
		_, ok := v.check(bad)
		assert.False(t, ok, bad)
	}
}

// TestVisitorCookieHostPrefix (issue 23 §6, issue 31 §3): Secure and
// host-only, the visitor cookie is __Host-flashgate_visitor (browsers refuse
// one a sibling subdomain or a plain-http page sets), and a plain
// flashgate_visitor — which those can set — is never read: a planted cookie
// does not fix the visitor's identity.
func TestVisitorCookieHostPrefix(t *testing.T) {
	e := newEnv(t, visitorMode())
	room := e.room(issuer.RoomConfig{Capacity: 1})
	_, err := e.is.Enter(context.Background(), room, "holder")
	require.NoError(t, err)
	enter := "/v1/rooms/" + room + "/enter"
	// The attacker's own visitor cookie, from a request anywhere.
	r := e.do(req{method: "POST", path: "/v1/rooms/" + e.room(issuer.RoomConfig{Capacity: 1}) + "/enter"})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Contains(t, r.header.Get("Set-Cookie"), "__Host-flashgate_visitor=")
	assert.NotContains(t, r.cookies(), VisitorCookie)
	planted := visitorCookie(t, r, true)

	// The victim's browser holds it under the plain name (planted from a
	// sibling subdomain or over http): the victim is a fresh visitor.
	r = e.do(req{method: "POST", path: enter, hdr: withCookie(VisitorCookie, planted)})
	require.Equal(t, 200, r.status, "%s", r.body)
	victim := visitorCookie(t, r, true)
	assert.NotEqual(t, planted, victim)
	victimToken := r.json(t)["waiting_token"]
	assert.NotContains(t, r.cookies(), VisitorCookie, "nothing is moved")
	// The attacker's enter does not return the victim's place.
	r = e.do(req{method: "POST", path: enter, hdr: withCookie(VisitorHostCookie, planted)})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.NotEqual(t, victimToken, r.json(t)["waiting_token"])
	assert.ElementsMatch(t, []string{VisitorPrefix + planted[:22], VisitorPrefix + victim[:22]}, e.waitingUsers(room))

	// Both names: the current one is the identity, nothing is set.
	r = e.do(req{method: "POST", path: enter, hdr: map[string]string{"Cookie": VisitorHostCookie + "=" + victim + "; " + VisitorCookie + "=" + planted}})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, victimToken, r.json(t)["waiting_token"])
	assert.Empty(t, r.header.Values("Set-Cookie"))

	// Insecure (plain-http development): the plain name, read.
	ins := newEnv(t, visitorMode(func(o *Options) { o.InsecureCookies = true }))
	r = ins.do(req{method: "POST", path: "/v1/rooms/" + ins.room(issuer.RoomConfig{}) + "/enter"})
	require.Equal(t, 200, r.status, "%s", r.body)
	visitorCookie(t, r, false)
	assert.NotContains(t, r.cookies(), VisitorHostCookie)
}

func TestHeaderModeIgnoresVisitorCookie(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	_, value := (&visitors{key: testVisitorKey}).mint()
	r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: "alice", hdr: withCookie(VisitorHostCookie, value)})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Empty(t, r.header.Values("Set-Cookie"))
	users, err := e.rdb.HKeys(context.Background(), roomKey(room, "users")).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"alice"}, users)
	e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", hdr: withCookie(VisitorHostCookie, value)}).
		problem(t, 401, "missing_user")

	// Header mode sets no admission cookie either.
	x := e.exchange(room, "alice", e.enter(room, "alice")["waiting_token"].(string))
	require.Equal(t, 200, x.status, "%s", x.body)
	assert.Empty(t, x.header.Values("Set-Cookie"))
}

func TestVisitorExchangeSetsAdmissionCookie(t *testing.T) {
	for name, c := range map[string]struct {
		mod    func(*Options)
		secure bool
		domain string
	}{
		"default":          {func(*Options) {}, true, ""},
		"cookie domain":    {func(o *Options) { o.CookieDomain = "shop.example" }, true, "shop.example"},
		"insecure cookies": {func(o *Options) { o.InsecureCookies = true }, false, ""},
	} {
		t.Run(name, func(t *testing.T) {
			clk := testkit.NewClock(testkit.Epoch)
			e := newEnv(t, withClock(clk.Now), visitorMode(c.mod))
			e.srv.now = clk.Now
			room := e.room(issuer.RoomConfig{Capacity: 1, SessionDuration: 5 * time.Minute})

			r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter"})
			require.Equal(t, 200, r.status, "%s", r.body)
			ent := r.json(t)
			require.Equal(t, "ACTIVE", ent["state"])
			name := visitorCookieName(c.secure, c.domain)
			assert.Equal(t, c.secure && c.domain == "", name == VisitorHostCookie, "__Host- only when Secure and host-only")
			v := visitorCookieAs(t, r, name, c.secure)

			clk.Advance(1500 * time.Millisecond)
			r = e.do(req{method: "POST", path: "/v1/rooms/" + room + "/exchange",
				bearer: ent["waiting_token"].(string), hdr: withCookie(name, v)})
			require.Equal(t, 200, r.status, "%s", r.body)

			// The JSON answer is unchanged.
			var members map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(r.body, &members))
			assert.ElementsMatch(t, []string{"admission_token", "admission_id", "admission", "expires_at_ms", "issued_at_ms", "expires_at", "issued_at"},
				slices.Collect(func(yield func(string) bool) {
					for k := range members {
						if !yield(k) {
							return
						}
					}
				}))
			var x ExchangeResponse
			require.NoError(t, json.Unmarshal(r.body, &x))

			cookies := r.cookies()
			assert.NotContains(t, cookies, name)
			a := cookies[AdmissionCookie]
			require.NotNil(t, a, "%v", r.header["Set-Cookie"])
			assert.Equal(t, verifier.DefaultCookie, a.Name)
			assert.Equal(t, x.AdmissionToken, a.Value)
			assert.Equal(t, "/", a.Path)
			assert.Equal(t, c.domain, a.Domain)
			assert.True(t, a.HttpOnly)
			assert.Equal(t, c.secure, a.Secure)
			assert.Equal(t, http.SameSiteLaxMode, a.SameSite)
			// exp − now in whole seconds: 300 s − 1.5 s → 298.
			assert.Equal(t, int(x.ExpiresAt-clk.Now().Unix())-1, a.MaxAge)
			assert.Equal(t, 298, a.MaxAge)
			raw := strings.Join(r.header.Values("Set-Cookie"), "\n")
			assert.Contains(t, raw, "HttpOnly")
			assert.Contains(t, raw, "SameSite=Lax")
			assert.Equal(t, c.secure, strings.Contains(strings.ToLower(raw), "secure"))

			// The token is the visitor's.
			ver, err := verifier.New(e.ring, verifier.Config{Issuer: "flashgate", Audience: "orders",
				Now: clk.Now})
			require.NoError(t, err)
			tok, err := ver.Verify(context.Background(), a.Value, verifier.Expect{Product: room, User: VisitorPrefix + v[:22]})
			require.NoError(t, err)
			assert.Equal(t, x.AdmissionID, tok.ID)
		})
	}
}

func TestVisitorEnterLimit(t *testing.T) {
	e := newEnv(t, visitorMode(func(o *Options) { o.EnterPerUser = 2 }))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	enter := "/v1/rooms/" + room + "/enter"
	v := visitorCookie(t, e.do(req{method: "POST", path: enter}), true)
	for range 2 {
		require.Equal(t, 200, e.do(req{method: "POST", path: enter, hdr: withCookie(VisitorHostCookie, v)}).status)
	}
	// The per-user limit counts a visitor by its cookie …
	e.do(req{method: "POST", path: enter, hdr: withCookie(VisitorHostCookie, v)}).problem(t, 429, "rate_limited")
	// … and does not apply to requests without a valid one (each is a fresh
	// visitor): the per-address limit is what bounds those.
	for range 3 {
		require.Equal(t, 200, e.do(req{method: "POST", path: enter, user: "alice"}).status)
	}
}
