package server

import (
	"context"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
)

// documentedStatus is every status the server documents (doc.go).
var documentedStatus = map[int]bool{200: true, 201: true, 204: true, 400: true, 401: true, 403: true,
	404: true, 405: true, 408: true, 409: true, 410: true, 413: true, 415: true, 429: true, 431: true, 503: true}

func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// FuzzHandlers sends random method/path/headers/body to every route: the
// answer must be a documented status, never a 5xx other than 503, never a
// panic; and a refused request (4xx) must leave Redis as it was (every key
// of the private redis-server: fg:rooms and the rooms' fg:{room}:* keys).
// The issuer's clock is frozen, so that no admission lapses during a long
// run (a lapse is housekeeping a refused completion may record).
func FuzzHandlers(f *testing.F) {
	clk := testkit.NewClock(time.Now())
	e := newEnv(f, privateRedis(), withClock(clk.Now), withOptions(func(o *Options) { o.EnterPerUser, o.EnterWindow = 20, 10*time.Second }))
	e.srv.sseMax, e.srv.sseInterval = 200*time.Millisecond, 50*time.Millisecond
	room := e.room(issuer.RoomConfig{Capacity: 1})
	alice := e.enter(room, "alice")["waiting_token"].(string)
	bob := e.enter(room, "bob")["waiting_token"].(string)
	x := e.exchange(room, "alice", alice).json(f)["admission_token"].(string)
	r := "/v1/rooms/" + room
	for _, s := range [][6]string{
		{"POST", r + "/enter", "carol", "", "", ""},
		{"POST", r + "/enter", "a{b}", "", "application/json", "{}"},
		{"POST", "/v1/rooms/a{b}/enter", "carol", "", "", ""},
		{"GET", r + "/status", "bob", "Bearer " + bob, "", ""},
		{"GET", r + "/status?waiting_token=" + bob, "alice", "", "", ""},
		{"GET", r + "/events", "bob", "Bearer " + bob, "", ""},
		{"GET", r + "/events", "alice", "Bearer " + alice, "", ""},
		{"POST", r + "/exchange", "bob", "Bearer " + bob, "", ""},
		{"POST", r + "/exchange", "alice", "Bearer " + alice, "", ""},
		{"POST", r + "/leave", "bob", "Bearer fgw2_AAAA_e_1_xx", "", ""},
		{"POST", "/v1/complete?product=" + room, "alice", "Bearer " + x, "", ""},
		{"POST", "/v1/complete", "", "Bearer " + x, "application/json", `{"product":"` + room + `"}`},
		{"POST", "/v1/complete", "", "Bearer a.b.c", "text/plain", `x`},
		{"GET", "/admin/rooms", "", "Bearer " + adminToken, "", ""},
		{"PUT", "/admin/rooms/fz", "", "Bearer " + adminToken, "application/json", `{"capacity":5,"state":"paused"}`},
		{"PUT", "/admin/rooms/fz", "", "Bearer " + adminToken, "application/json", `{"capacity":1e99}`},
		{"POST", "/admin/rooms/fz/open", "", "Bearer " + adminToken, "", ""},
		{"POST", "/admin/rooms/" + room + "/revoke", "", "Bearer " + adminToken, "application/json", `{"user":"alice"}`},
		{"GET", "/admin/rooms/" + room + "/stats", "", "Bearer wrong", "", ""},
		{"GET", "/.well-known/jwks.json", "", "", "", ""},
		{"GET", "/readyz", "", "", "", ""},
		{"GET", "/metrics", "", "", "", ""},
		{"DELETE", "/healthz", "", "", "", ""},
		{"PATCH", "/v1/%zz", "", "", "", ""},
		{"POST", "/v1/rooms/a%7Bb%7D/enter", "carol", "", "", ""},
		{"POST", "/v1/rooms/a%3Ab/enter", "carol", "", "", ""},
		{"POST", "/v1/rooms/a%00b/enter", "carol", "", "", ""},
		{"GET", "/v1/rooms/caf%C3%A9/status", "bob", "Bearer " + bob, "", ""},
		{"POST", r + "/enter", "a:b", "", "", ""},
		{"POST", r + "/enter", strings.Repeat("u", 129), "", "", ""},
		{"POST", r + "/enter", "carol", "", "application/json", `{"unknown":1}`},
		{"POST", r + "/enter", "carol", "", "text/plain", `{}`},
		{"POST", r + "/leave", "bob", "Bearer " + bob, "application/json", `[]`},
		{"POST", r + "/leave", "alice", "Bearer " + bob, "", ""},
		{"POST", r + "/exchange", "bob", "Bearer " + alice, "", ""},
		{"PUT", "/admin/rooms/" + room, "", "Bearer " + adminToken, "application/json", `{"capacity":0}`},
		{"PUT", "/admin/rooms/" + room, "", "Bearer " + adminToken, "application/json", `null`},
		{"POST", "/admin/rooms/" + room + "/close", "", "Bearer " + adminToken, "application/json", `{"x":1}`},
		{"POST", "/" + strings.Repeat("\x92", 600), "a{", "", "application/json", `{}`}, // a request line over 4 KiB: 431
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	app := e.srv.App()
	f.Fuzz(func(t *testing.T, method, path, user, auth, ctype, body string) {
		if len(body) > 4096 {
			body = body[:4096]
		}
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, "http://flashgate.test"+clean(path), rd)
		if err != nil || method == "CONNECT" {
			return // not an HTTP request net/http can express
		}
		for k, v := range map[string]string{"X-User-ID": user, "Authorization": auth, "Content-Type": ctype} {
			if v = clean(v); v != "" && len(v) < 2048 {
				req.Header.Set(k, v)
			}
		}
		if err := e.is.WaitMinted(context.Background()); err != nil { // earlier exchanges' notes land first
			t.Fatal(err)
		}
		before := snapshot(t, e.rdb)
		res, err := app.Test(req, 10_000)
		if err != nil && strings.Contains(err.Error(), "small read buffer") {
			// A request line and headers over fiber's ReadBufferSize (4 KiB): on
			// a connection fasthttp answers 431 before any handler runs; app.Test
			// returns its error instead.
			return
		}
		if err != nil {
			t.Fatalf("%s %q: %v", method, path, err)
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		if !documentedStatus[res.StatusCode] {
			t.Fatalf("%s %q: undocumented status %d", method, path, res.StatusCode)
		}
		if res.StatusCode >= 400 && res.StatusCode < 500 {
			if err := e.is.WaitMinted(context.Background()); err != nil {
				t.Fatal(err)
			}
			if after := snapshot(t, e.rdb); !maps.Equal(before, after) {
				t.Fatalf("%s %q (user %q, %q, body %q): %d but Redis changed:\nbefore %v\nafter  %v",
					method, path, user, ctype, body, res.StatusCode, before, after)
			}
		}
	})
}
