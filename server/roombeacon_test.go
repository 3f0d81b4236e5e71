package server

import (
	"context"
	"crypto/ed25519"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
)

// SignBeacon signs a room beacon like keys.Ring: typ flashgate-beacon+jwt.
func (r *testRing) SignBeacon(payload []byte) (string, error) {
	h := b64.EncodeToString([]byte(`{"alg":"EdDSA","kid":"test","typ":"` + flashgate.BeaconType + `"}`))
	in := h + "." + b64.EncodeToString(payload)
	return in + "." + b64.EncodeToString(ed25519.Sign(r.priv, []byte(in))), nil
}

// commandCalls sums INFO commandstats' calls: every command (those scripts
// run included, INFO left out) and the script calls alone.
func commandCalls(t testing.TB, e *env) (all, scripts int64) {
	t.Helper()
	out, err := e.rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		if i := strings.Index(line, "calls="); i >= 0 {
			v := line[i+len("calls="):]
			c, _ := strconv.ParseInt(v[:strings.IndexByte(v, ',')], 10, 64)
			all += c
			if strings.HasPrefix(line, "cmdstat_eval") {
				scripts += c
			}
		}
	}
	return all, scripts
}

// TestRoomBeaconRoute: one document for every buyer, cacheable, signed
// under its own typ, and read from Redis once per max-age per room however
// many requests come.
func TestRoomBeaconRoute(t *testing.T) {
	e := newEnv(t, privateRedis())
	var mu sync.Mutex
	now := time.Now()
	e.srv.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	room := e.room(issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, State: issuer.RoomPaused, PageMessage: "Soon."})
	for i := range 40 {
		e.enter(room, "u"+strconv.Itoa(i))
	}
	path := "/v1/rooms/" + room + "/beacon"

	first := e.do(req{method: "GET", path: path})
	require.Equal(t, 200, first.status, "body: %s", first.body)
	require.Equal(t, "public, max-age=1, stale-while-revalidate=2", first.header.Get("Cache-Control"))
	require.Equal(t, "application/jwt", first.header.Get("Content-Type"))
	require.Empty(t, first.header.Values("Set-Cookie"))
	require.Empty(t, first.header.Values("Vary"))

	// N requests of many buyers: the same bytes, one script call (or two:
	// EVALSHA, then EVAL on NOSCRIPT) for the lot.
	all0, scripts0 := commandCalls(t, e)
	const n = 500
	for i := range n {
		r := e.do(req{method: "GET", path: path, user: "u" + strconv.Itoa(i%40),
			hdr: map[string]string{"Cookie": "fg_visitor=v" + strconv.Itoa(i), "Authorization": "Bearer x" + strconv.Itoa(i)}})
		require.Equal(t, 200, r.status)
		require.Equal(t, first.body, r.body, "every buyer gets the same document")
		require.Empty(t, r.header.Values("Set-Cookie"))
	}
	all1, scripts1 := commandCalls(t, e)
	require.Zero(t, scripts1-scripts0, "%d beacon requests within max-age: no Redis call", n)
	require.Zero(t, all1-all0)
	advance(BeaconMaxAge)
	for range n {
		require.Equal(t, 200, e.do(req{method: "GET", path: path}).status)
	}
	all2, scripts2 := commandCalls(t, e)
	require.EqualValues(t, 1, scripts2-scripts1, "one script call per room per max-age")
	t.Logf("%d beacon requests over one refresh: %d script call, %d Redis commands (the script's own included)",
		n, scripts2-scripts1, all2-all1)

	// Signed by the admission keys, under its own typ.
	iss, _ := e.is.TokenClaims()
	v, err := verifier.New(e.ring, verifier.Config{Issuer: iss, Audience: "x"})
	require.NoError(t, err)
	b, err := v.VerifyBeacon(context.Background(), string(first.body), room)
	require.NoError(t, err)
	require.Equal(t, "paused", b.State)
	require.Equal(t, "Soon.", b.PageMessage)
	require.EqualValues(t, 40, b.TotalWaiting)
	place, maxErr, ok := b.Place(30)
	require.True(t, ok)
	require.EqualValues(t, 30, place) // paused: nobody admitted, nobody left
	require.Zero(t, maxErr)
	_, err = v.Verify(context.Background(), string(first.body), verifier.Expect{Product: room})
	require.ErrorIs(t, err, verifier.ErrBadType, "a beacon is never an admission token")

	// Errors are not cacheable, and the replica keeps them a max-age too:
	// made-up rooms cost Redis one call per name and second.
	_, scripts3 := commandCalls(t, e)
	for range 50 {
		r := e.do(req{method: "GET", path: "/v1/rooms/no-such-room-" + room + "/beacon"})
		r.problem(t, 404, "unknown_room")
		require.Equal(t, "no-store", r.header.Get("Cache-Control"))
	}
	_, scripts4 := commandCalls(t, e)
	require.LessOrEqual(t, scripts4-scripts3, int64(2), "one script call (EVALSHA, EVAL on NOSCRIPT at most)")
}

// TestBeaconHint: a WAITING answer names the beacon when Options.Beacon
// says so — always, or (auto) while the replica holds MaxStreams streams.
func TestBeaconHint(t *testing.T) {
	for _, c := range []struct {
		mode       string
		maxStreams int
		full       bool
		want       bool
	}{
		{BeaconAlways, 0, false, true},
		{BeaconOff, 1, true, false},
		{"", 0, false, false},
		{BeaconAuto, 2, false, false},
		{BeaconAuto, 2, true, true},
	} {
		e := newEnv(t, withOptions(func(o *Options) { o.Beacon = c.mode; o.MaxStreams = c.maxStreams }))
		room := e.room(issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, State: issuer.RoomPaused})
		if c.full {
			e.srv.streams.mu.Lock()
			e.srv.streams.open = c.maxStreams
			e.srv.streams.mu.Unlock()
		}
		w := e.enter(room, "bob")
		r := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: "bob", bearer: w["waiting_token"].(string)})
		require.Equal(t, 200, r.status)
		want := ""
		if c.want {
			want = "/v1/rooms/" + room + "/beacon"
		}
		require.Equal(t, want, r.header.Get(HeaderBeacon), "mode %q, full %v", c.mode, c.full)
		// The waiting page says so to wait.js (data-beacon): it then holds no stream.
		page := e.do(req{method: "GET", path: "/wait/" + room, user: "bob", hdr: map[string]string{"Accept": "text/html"}})
		require.Equal(t, 200, page.status, "%s", page.body)
		require.Equal(t, c.want, strings.Contains(string(page.body), `data-beacon="1"`), "mode %q, full %v", c.mode, c.full)
	}
	_, err := New(Options{Beacon: "sometimes"})
	require.Error(t, err)
}
