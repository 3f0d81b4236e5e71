package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

// Bad input on the HTTP API: every refusal has its own problem type, and
// nothing of a refused request reaches Redis.

// snapshot is the whole keyspace: every key with its DUMP and whether it
// has a TTL (fg:rooms, the rooms' fg:{room}:* keys, and anything a bad id
// might have created).
func snapshot(t testing.TB, rdb *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	it := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for it.Next(ctx) {
		k := it.Val()
		d, err := rdb.Dump(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		require.NoError(t, err)
		out[k] = fmt.Sprintf("%q ttl=%t", d, rdb.PTTL(ctx, k).Val() > 0)
	}
	require.NoError(t, it.Err())
	return out
}

// unchanged runs f and asserts that the keyspace is the same afterwards.
// The notes of tokens minted earlier (written in the background) land first.
func (e *env) unchanged(what string, f func()) {
	e.t.Helper()
	require.NoError(e.t, e.is.WaitMinted(context.Background()))
	before := snapshot(e.t, e.rdb)
	f()
	require.NoError(e.t, e.is.WaitMinted(context.Background()))
	require.Equal(e.t, before, snapshot(e.t, e.rdb), "%s changed Redis", what)
}

// populated is a private env with a room (capacity 1) where alice is
// admitted and bob waits, plus a second room where alice waits.
type populated struct {
	*env
	room, other      string
	alice, bob, dave string // waiting tokens: alice, bob in room; dave in other
	aliceOther       string // alice's waiting token of other
}

func newPopulated(t *testing.T, now func() time.Time, mod ...func(*Options)) *populated {
	e := newEnv(t, privateRedis(), withClock(now), withOptions(mod...))
	p := &populated{env: e, room: e.room(issuer.RoomConfig{Capacity: 1}), other: e.room(issuer.RoomConfig{Capacity: 1})}
	p.alice = e.enter(p.room, "alice")["waiting_token"].(string)
	p.bob = e.enter(p.room, "bob")["waiting_token"].(string)
	p.dave = e.enter(p.other, "dave")["waiting_token"].(string)
	p.aliceOther = e.enter(p.other, "alice")["waiting_token"].(string)
	return p
}

// badIDs are room ids, as path segments, that must never reach Redis: the
// literal and percent-encoded forms of '{', '}', ':', control characters,
// spaces, non-ASCII, and one byte too many.
var badIDs = []string{
	"a{b}", "{", "}", "%7Broom%7D", "a%7D", "a:b", "a%3Ab", "%3A",
	"a%00b", "%00", "a%0Ab", "a%0D%0Ab", "a%09b", "a%7Fb", "a%01b",
	"a%20b", "%20a",
	"caf%C3%A9", "café", "%E2%80%8B", // non-ASCII, zero-width space
	strings.Repeat("r", 129),
	"%257B", "a%25b", // double encoding: one unescape leaves a '%'
	"a%5Cb", "a%22b", "a*b", "a,b", "a;b", "a%23b", "a%3Fb", "a%2Cb",
}

func TestBadRoomIDsNeverReachRedis(t *testing.T) {
	p := newPopulated(t, nil)
	routes := []struct {
		method, path   string
		user, tok, adm string
		body           string
	}{
		{"POST", "/v1/rooms/%s/enter", "carol", "", "", ""},
		{"GET", "/v1/rooms/%s/status", "bob", p.bob, "", ""},
		{"GET", "/v1/rooms/%s/events", "bob", p.bob, "", ""},
		{"POST", "/v1/rooms/%s/leave", "bob", p.bob, "", ""},
		{"POST", "/v1/rooms/%s/exchange", "alice", p.alice, "", ""},
		{"GET", "/admin/rooms/%s", "", "", adminToken, ""},
		{"PUT", "/admin/rooms/%s", "", "", adminToken, `{"capacity":5}`},
		{"POST", "/admin/rooms/%s/open", "", "", adminToken, ""},
		{"POST", "/admin/rooms/%s/revoke", "", "", adminToken, `{"user":"alice"}`},
		{"GET", "/admin/rooms/%s/stats", "", "", adminToken, ""},
	}
	for _, id := range badIDs {
		for _, rt := range routes {
			path := fmt.Sprintf(rt.path, id)
			bearer := rt.tok
			if rt.adm != "" {
				bearer = rt.adm
			}
			p.unchanged(rt.method+" "+path, func() {
				r := p.do(req{method: rt.method, path: path, user: rt.user, bearer: bearer, body: rt.body})
				m := r.problem(t, 400, "invalid_input")
				assert.Contains(t, m["detail"], "invalid room id", "%s %s", rt.method, path)
			})
		}
	}

	// Boundaries: 128 bytes is a valid id (an unknown room), and ids that
	// decode to a path of another shape are unknown routes.
	p.unchanged("128-byte room", func() {
		p.do(req{method: "POST", path: "/v1/rooms/" + strings.Repeat("r", 128) + "/enter", user: "carol"}).
			problem(t, 404, "unknown_room")
	})
	for _, id := range []string{"a%2Fb", "%2F", "", "a/b"} {
		p.unchanged("room "+id, func() {
			p.do(req{method: "POST", path: "/v1/rooms/" + id + "/enter", user: "carol"}).problem(t, 404, "unknown_route")
		})
	}
	// The product of /v1/complete is a room id too; a bad one never
	// matches a token's product.
	x := p.exchange(p.room, "alice", p.alice).json(t)["admission_token"].(string)
	for _, id := range []string{"a%7Bb%7D", "a%3Ab", "a%00b"} {
		p.unchanged("complete "+id, func() {
			m := p.do(req{method: "POST", path: "/v1/complete?product=" + id, bearer: x}).problem(t, 403, "admission_token_scope")
			assert.Equal(t, "bad_product", m["reason"])
		})
	}
}

func TestBadUserIDsNeverReachRedis(t *testing.T) {
	p := newPopulated(t, nil)
	bad := []string{"a{b}", "{", "}", "u:1", ":", "a b", "a\tb", "a\x7fb", "a\x01b", "é", "josé",
		"%7B", "a%3Ab", "a%00b", strings.Repeat("u", 129), "a,b", "a;b", "a/b", "a\"b", "<script>"}
	for _, u := range bad {
		for _, rt := range []struct{ method, path, tok string }{
			{"POST", "/v1/rooms/" + p.room + "/enter", ""},
			{"GET", "/v1/rooms/" + p.room + "/status", p.bob},
			{"GET", "/v1/rooms/" + p.room + "/events", p.bob},
			{"POST", "/v1/rooms/" + p.room + "/leave", p.bob},
			{"POST", "/v1/rooms/" + p.room + "/exchange", p.alice},
		} {
			p.unchanged(fmt.Sprintf("%s %s user %q", rt.method, rt.path, u), func() {
				m := p.do(req{method: rt.method, path: rt.path, user: u, bearer: rt.tok}).problem(t, 400, "invalid_input")
				assert.Contains(t, m["detail"], "invalid user id")
			})
		}
	}
	// 128 bytes is fine.
	long := strings.Repeat("u", 128)
	r := p.do(req{method: "POST", path: "/v1/rooms/" + p.room + "/enter", user: long})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "WAITING", r.json(t)["state"])
}

func TestMissingUserHeader(t *testing.T) {
	p := newPopulated(t, nil)
	for _, rt := range []struct{ method, path, tok string }{
		{"POST", "/v1/rooms/" + p.room + "/enter", ""},
		{"GET", "/v1/rooms/" + p.room + "/status", p.bob},
		{"GET", "/v1/rooms/" + p.room + "/events", p.bob},
		{"POST", "/v1/rooms/" + p.room + "/leave", p.bob},
		{"POST", "/v1/rooms/" + p.room + "/exchange", p.alice},
	} {
		p.unchanged(rt.method+" "+rt.path, func() {
			p.do(req{method: rt.method, path: rt.path, bearer: rt.tok}).problem(t, 401, "missing_user")
			// An empty header is an absent one.
			p.do(req{method: rt.method, path: rt.path, bearer: rt.tok, hdr: map[string]string{"X-User-ID": ""}}).
				problem(t, 401, "missing_user")
		})
	}
}

func TestWaitingTokens(t *testing.T) {
	clk := testkit.NewClock(time.Now())
	p := newPopulated(t, clk.Now)
	routes := []struct{ method, path string }{
		{"GET", "/v1/rooms/%s/status"},
		{"GET", "/v1/rooms/%s/events"},
		{"POST", "/v1/rooms/%s/leave"},
		{"POST", "/v1/rooms/%s/exchange"},
	}
	malformedType := problem.Base + "invalid-waiting-token"
	foreignType := problem.Base + "token-owner-mismatch"
	require.NotEqual(t, malformedType, foreignType)

	// Malformed: 401 invalid_waiting_token, whatever the route, before Redis.
	x := p.exchange(p.room, "alice", p.alice).json(t)["admission_token"].(string)
	// fgw2_<sid>_<epoch>_<seq>_<mac>: the sid and the MAC are positional (base64url has '_').
	body := strings.TrimPrefix(p.bob, "fgw2_")
	sid, rest := body[:4], body[5:]
	epoch, rest, _ := strings.Cut(rest, "_")
	seq, mac, _ := strings.Cut(rest, "_")
	w := func(parts ...string) string { return "fgw2_" + strings.Join(parts, "_") }
	malformed := []string{"", "garbage", "fgw2_", w("", epoch, seq, mac), w(sid[:3], epoch, seq, mac),
		w(sid+"=", epoch, seq, mac), w(sid, "", seq, mac), w(sid, "EPOCH", seq, mac), w(sid, epoch+"-", seq, mac),
		w(sid, strings.Repeat("z", 14), seq, mac), w(sid, epoch, "0", mac), w(sid, epoch, "0"+seq, mac),
		w(sid, epoch, "-1", mac), w(sid, epoch, seq), w(sid, epoch, seq, ""), w(sid, epoch, seq, mac+"="),
		w(sid, epoch, seq, mac[:len(mac)-1]), w(sid, epoch, seq, mac+"AA"), "fgw1_" + seq + "_" + mac,
		"FGW2_" + body, w(sid, epoch, seq, strings.Repeat("A", 60)),
		w(sid, epoch, "99999999999999999999", mac), x /* an admission token is no waiting token */}
	for _, rt := range routes {
		path := fmt.Sprintf(rt.path, p.room)
		for _, tok := range malformed {
			p.unchanged(fmt.Sprintf("%s %q", path, tok), func() {
				r := p.do(req{method: rt.method, path: path, user: "bob", bearer: tok})
				m := r.problem(t, 401, "invalid_waiting_token")
				assert.Equal(t, malformedType, m["type"])
				assert.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
			})
		}
		// The query parameter (EventSource clients) is checked the same way.
		p.unchanged(path+"?waiting_token=garbage", func() {
			p.do(req{method: rt.method, path: path + "?waiting_token=garbage", user: "bob"}).problem(t, 401, "invalid_waiting_token")
		})

		// Foreign: another user's token (bob presents alice's, alice bob's),
		// another room's (dave's token of other, alice's token of other
		// presented in room): 403 token_owner_mismatch.
		for _, c := range []struct{ user, tok, why string }{
			{"bob", p.alice, "another user's token"},
			{"alice", p.bob, "another user's token"},
			{"dave", p.bob, "another user's token, user waiting elsewhere"},
			{"alice", p.aliceOther, "the same user's token of another room"},
			{"dave", p.dave, "a token of another room"},
		} {
			p.unchanged(fmt.Sprintf("%s: %s", path, c.why), func() {
				m := p.do(req{method: rt.method, path: path, user: c.user, bearer: c.tok}).problem(t, 403, "token_owner_mismatch")
				assert.Equal(t, foreignType, m["type"], c.why)
			})
		}
		// A valid token at an unknown room is foreign too (the MAC binds the room).
		p.unchanged(path+" unknown room", func() {
			p.do(req{method: rt.method, path: fmt.Sprintf(rt.path, "no-such-room"), user: "bob", bearer: p.bob}).
				problem(t, 403, "token_owner_mismatch")
		})
	}

	// Expired: alice's admission lapses (session 5 min). Exchange answers
	// 410 expired and changes nothing; status reports EXPIRED.
	clk.Advance(issuer.DefaultSessionDuration + time.Second)
	p.unchanged("exchange of an expired admission", func() {
		p.exchange(p.room, "alice", p.alice).problem(t, 410, "expired")
		p.exchange(p.room, "alice", p.alice).problem(t, 410, "expired")
	})
	r := p.do(req{method: "GET", path: "/v1/rooms/" + p.room + "/status", user: "alice", bearer: p.alice})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "EXPIRED", r.json(t)["state"])
	// Its admission token still verifies offline (the verifier's clock is
	// the real one), but Redis knows the admission lapsed: 410 expired. The
	// first completion attempt records the lapse (housekeeping: the entry
	// moves to the ended set, the expired counter counts it); the state a
	// client sees stays EXPIRED, and a repeated attempt changes nothing.
	p.do(req{method: "POST", path: "/v1/complete?product=" + p.room, bearer: x}).problem(t, 410, "expired")
	p.unchanged("repeated complete of an expired admission", func() {
		p.do(req{method: "POST", path: "/v1/complete?product=" + p.room, bearer: x}).problem(t, 410, "expired")
		p.exchange(p.room, "alice", p.alice).problem(t, 410, "expired")
	})
	r = p.do(req{method: "GET", path: "/v1/rooms/" + p.room + "/status", user: "alice", bearer: p.alice})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "EXPIRED", r.json(t)["state"])
}

func TestContentTypesAndBodies(t *testing.T) {
	p := newPopulated(t, nil)
	x := p.exchange(p.room, "alice", p.alice).json(t)["admission_token"].(string)
	routes := []req{
		{method: "POST", path: "/v1/rooms/" + p.room + "/enter", user: "carol"},
		{method: "POST", path: "/v1/rooms/" + p.room + "/leave", user: "bob", bearer: p.bob},
		{method: "POST", path: "/v1/rooms/" + p.room + "/exchange", user: "alice", bearer: p.alice},
		{method: "POST", path: "/v1/complete?product=" + p.room, bearer: x},
		{method: "PUT", path: "/admin/rooms/" + p.room, bearer: adminToken},
		{method: "POST", path: "/admin/rooms/" + p.room + "/pause", bearer: adminToken},
		{method: "POST", path: "/admin/rooms/" + p.room + "/revoke", bearer: adminToken},
	}
	for _, rt := range routes {
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "text/json",
			"application/jsonx", "application/problem+json", "json", "application/json;;", "*/*"} {
			rq := rt
			rq.body, rq.ctype = `{"capacity":5}`, ct
			p.unchanged(fmt.Sprintf("%s %s as %s", rq.method, rq.path, ct), func() {
				m := p.do(rq).problem(t, 415, "unsupported_media_type")
				if ct == "application/x-www-form-urlencoded" { // curl -d's default: the detail says what to add
					assert.Contains(t, m["detail"], "-H 'Content-Type: application/json'")
				}
			})
		}
		// A body without any Content-Type.
		p.unchanged(rt.method+" "+rt.path+" without Content-Type", func() {
			rq := rt
			rq.body, rq.ctype = `{}`, "x/x"
			rq.hdr = map[string]string{"Content-Type": ""}
			p.do(rq).problem(t, 415, "unsupported_media_type")
		})
		// Compressed bodies: 415, never inflated (a gzip bomb of 16 KiB
		// would expand to gigabytes).
		for _, ce := range []string{"gzip", "gzip, gzip", "deflate", "br", "GZIP", "identity, gzip"} {
			p.unchanged(rt.method+" "+rt.path+" Content-Encoding "+ce, func() {
				rq := rt
				rq.body = string(gzipBomb())
				rq.hdr = map[string]string{"Content-Encoding": ce}
				r := p.do(rq)
				r.problem(t, 415, "unsupported_media_type")
				assert.Equal(t, "identity", r.header.Get("Accept-Encoding"))
			})
		}
		// Unknown JSON members: 400 invalid_input, on routes with and
		// without a body of their own.
		p.unchanged(rt.method+" "+rt.path+" unknown member", func() {
			rq := rt
			rq.body = `{"product":"` + p.room + `","capacity":5,"user":"alice","zzz_unknown":1}`
			m := p.do(rq).problem(t, 400, "invalid_input")
			assert.Contains(t, m["detail"], "unknown field")
		})
		for _, body := range []string{`[]`, `null`, `"x"`, `{`, `{}{}`, `{} x`, "\x00"} {
			p.unchanged(fmt.Sprintf("%s %s body %q", rt.method, rt.path, body), func() {
				rq := rt
				rq.body = body
				r := p.do(rq)
				require.Equal(t, 400, r.status, "%s %q: %s", rt.path, body, r.body)
				assert.Contains(t, []string{"malformed_json", "invalid_input"}, r.json(t)["code"])
			})
		}
	}
	// The routes that take no body still accept an empty one or {}.
	for _, body := range []string{"", "{}", " { } "} {
		r := p.do(req{method: "POST", path: "/v1/rooms/" + p.room + "/enter", user: "carol", body: body})
		require.Equal(t, 200, r.status, "%q: %s", body, r.body)
	}
}

// gzipBomb is gzip(gzip(1 MiB of spaces)) around a JSON object.
var gzipBomb = sync.OnceValue(func() []byte {
	var inner, outer bytes.Buffer
	zw := gzip.NewWriter(&inner)
	_, _ = zw.Write([]byte("{"))
	_, _ = zw.Write(bytes.Repeat([]byte(" "), 1<<20))
	_, _ = zw.Write([]byte("}"))
	_ = zw.Close()
	zw = gzip.NewWriter(&outer)
	_, _ = zw.Write(inner.Bytes())
	_ = zw.Close()
	return outer.Bytes()
})

// rawRequest sends one raw HTTP/1.1 request to addr and returns the answer.
func rawRequest(t *testing.T, base, raw string) resp {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = conn.Write([]byte(raw))
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	return readResp(t, res)
}

// TestSizeLimits runs over TCP: fasthttp refuses oversized headers and
// bodies while reading them.
func TestSizeLimits(t *testing.T) {
	p := newPopulated(t, nil, func(o *Options) { o.BodyLimit = 1024 })
	base := p.listen()
	enter := "/v1/rooms/" + p.room + "/enter"

	// Headers over fasthttp's 4 KiB read buffer: 431.
	p.unchanged("huge header", func() {
		r := rawRequest(t, base, "POST "+enter+" HTTP/1.1\r\nHost: x\r\nX-User-ID: carol\r\nX-Junk: "+
			strings.Repeat("j", 8<<10)+"\r\nContent-Length: 0\r\n\r\n")
		r.problem(t, 431, "headers_too_large")
	})
	p.unchanged("huge user header", func() {
		r := rawRequest(t, base, "POST "+enter+" HTTP/1.1\r\nHost: x\r\nX-User-ID: "+
			strings.Repeat("u", 8<<10)+"\r\nContent-Length: 0\r\n\r\n")
		r.problem(t, 431, "headers_too_large")
	})
	p.unchanged("huge path", func() {
		r := rawRequest(t, base, "POST /v1/rooms/"+strings.Repeat("r", 8<<10)+"/enter HTTP/1.1\r\nHost: x\r\nX-User-ID: carol\r\nContent-Length: 0\r\n\r\n")
		r.problem(t, 431, "headers_too_large")
	})
	// A user header of a few hundred bytes fits the buffer and is an invalid id.
	p.unchanged("long user header", func() {
		r := rawRequest(t, base, "POST "+enter+" HTTP/1.1\r\nHost: x\r\nX-User-ID: "+
			strings.Repeat("u", 300)+"\r\nContent-Length: 0\r\n\r\n")
		r.problem(t, 400, "invalid_input")
	})

	// Bodies over BodyLimit: 413, declared or chunked.
	big := `{"product":"` + strings.Repeat("p", 2000) + `"}`
	for _, path := range []string{enter, "/v1/rooms/" + p.room + "/leave", "/v1/complete", "/admin/rooms/" + p.room} {
		p.unchanged("big body "+path, func() {
			r := rawRequest(t, base, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nX-User-ID: carol\r\n"+
				"Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				path, adminToken, len(big), big))
			r.problem(t, 413, "body_too_large")
		})
	}
	p.unchanged("big chunked body", func() {
		r := rawRequest(t, base, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nX-User-ID: carol\r\n"+
			"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", enter, len(big), big))
		r.problem(t, 413, "body_too_large")
	})
}
