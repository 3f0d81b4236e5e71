package server

import (
	"context"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// refreshTarget is the URL of a page's <noscript> meta refresh ("" when it
// reloads itself or has none).
var refreshRe = regexp.MustCompile(`<meta http-equiv="refresh" content="(\d+)(?:; url=([^"]*))?">`)

func refreshTarget(t *testing.T, body string) (secs int, target string) {
	t.Helper()
	m := refreshRe.FindStringSubmatch(body)
	require.NotNil(t, m, "no meta refresh in:\n%s", body)
	secs, _ = strconv.Atoi(m[1])
	return secs, html.UnescapeString(m[2])
}

// TestPageEstimate (issue 34 §3, the page without JavaScript on the
// beacon): with FLASHGATE_BEACON=always, a buyer far from the front gets a
// personal page whose meta refresh leads to the shared estimate page of
// its rounded arrival number; that page holds nothing of the buyer
// (public, max-age=1, no cookie, no Vary on Accept-Language, the language
// from ?lang), shows the beacon's place as ≈ n within the beacon's bound
// plus the rounding, keeps the language form's arrival, reloads itself,
// and sends the buyer back to the personal page (303) once the beacon
// places it near the front. A buyer near the front, and every buyer
// without the beacon mode, reloads the personal page.
func TestPageEstimate(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.Beacon = BeaconAlways; o.ReturnOrigins = []string{shop} }))
	room := e.room(issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, State: issuer.RoomPaused})
	ctx := context.Background()
	const n = 1200
	for i := range n {
		_, err := e.is.Enter(ctx, room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	page := func(user string) string {
		r := e.do(req{method: "GET", path: "/wait/" + room + "?lang=de&return=" + url.QueryEscape(shop+"/p"), user: user,
			hdr: map[string]string{"Accept": "text/html"}})
		require.Equal(t, 200, r.status, "%s", r.body)
		return string(r.body)
	}

	// Near the front: the personal page reloads itself.
	_, target := refreshTarget(t, page("u3"))
	assert.Empty(t, target, "near the front the page reloads itself (the exact place)")

	// Far back: the estimate page of the rounded arrival.
	_, target = refreshTarget(t, page("u1000"))
	require.True(t, strings.HasPrefix(target, "/wait/"+room+"/estimate?"), "%q", target)
	tu, err := url.Parse(target)
	require.NoError(t, err)
	q, err := strconv.ParseInt(tu.Query().Get("arrival"), 10, 64)
	require.NoError(t, err)
	assert.LessOrEqual(t, q, int64(1001), "rounded down")
	assert.Greater(t, q, int64(1001-1001/64), "by at most 1/64 of the distance")
	assert.Equal(t, "de", tu.Query().Get("lang"))
	assert.Equal(t, shop+"/p", tu.Query().Get("return"))
	// Buyers nearby share it.
	_, other := refreshTarget(t, page("u1001"))
	assert.Equal(t, target, other, "u1000 and u1001 share one estimate page")

	est := e.do(req{method: "GET", path: target, hdr: map[string]string{"Accept": "text/html", "Accept-Language": "fr"}})
	require.Equal(t, 200, est.status, "%s", est.body)
	assert.Equal(t, "public, max-age=1, stale-while-revalidate=2", est.header.Get("Cache-Control"))
	assert.Empty(t, est.header.Values("Set-Cookie"), "the estimate page sets no cookie")
	assert.NotContains(t, est.header.Get("Vary"), "Accept-Language", "its language is ?lang's")
	assert.Equal(t, "de", est.header.Get("Content-Language"))
	body := string(est.body)
	m := regexp.MustCompile(`<dd id="position">≈ ([0-9.,\s]+)</dd>`).FindStringSubmatch(body)
	require.NotNil(t, m, "the place, estimated:\n%s", body)
	pos, err := strconv.ParseInt(strings.NewReplacer(".", "", ",", "", " ", "", "\u00a0", "").Replace(m[1]), 10, 64)
	require.NoError(t, err, m[1])
	assert.InDelta(t, q, pos, 0, "nobody left: the beacon's place of arrival q is exact")
	secs, self := refreshTarget(t, body)
	assert.Equal(t, int(EstimateRefresh.Seconds()), secs)
	assert.Empty(t, self, "the estimate page reloads itself")
	assert.Contains(t, body, `<input type="hidden" name="arrival" value="`+strconv.FormatInt(q, 10)+`">`, "the language form keeps the arrival")
	assert.Contains(t, body, `data-estimate-of="/wait/`+room+`?lang=de&amp;return=`+url.QueryEscape(shop+"/p")+`"`, "wait.js goes to the buyer's own page")
	assert.NotContains(t, body, "fgw", "no waiting token on a shared page")

	// Near the front: 303 to the personal page (cacheable too: the same for every buyer of q).
	near := e.do(req{method: "GET", path: "/wait/" + room + "/estimate?arrival=5&lang=de&return=" + url.QueryEscape(shop+"/p")})
	require.Equal(t, 303, near.status, "%s", near.body)
	assert.Equal(t, "/wait/"+room+"?lang=de&return="+url.QueryEscape(shop+"/p"), near.header.Get("Location"))
	// A return URL outside the allowlist is dropped, not echoed.
	evil := e.do(req{method: "GET", path: "/wait/" + room + "/estimate?arrival=5&return=" + url.QueryEscape("https://evil.example/")})
	require.Equal(t, 303, evil.status)
	assert.Equal(t, "/wait/"+room, evil.header.Get("Location"))
	// A malformed arrival is the page's 400.
	bad := e.do(req{method: "GET", path: "/wait/" + room + "/estimate?arrival=x", hdr: map[string]string{"Accept": "text/html"}})
	assert.Equal(t, 400, bad.status)
	assert.Equal(t, "no-store", bad.header.Get("Cache-Control"))

	// Without the beacon mode, far back: the personal page reloads itself.
	e2 := newEnv(t, withOptions(func(o *Options) { o.Beacon = BeaconOff }))
	room2 := e2.room(issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, State: issuer.RoomPaused})
	for i := range 300 {
		_, err := e2.is.Enter(ctx, room2, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	r := e2.do(req{method: "GET", path: "/wait/" + room2, user: "u250", hdr: map[string]string{"Accept": "text/html"}})
	require.Equal(t, 200, r.status)
	_, target = refreshTarget(t, string(r.body))
	assert.Empty(t, target)
}

func TestEstimateArrival(t *testing.T) {
	for _, c := range []struct{ arrival, head, want int64 }{
		{10, 0, 10},             // nobody waits: as is
		{200, 100, 200},         // within 128 of the head: as is
		{1001, 1, 1000},         // 1000 back: a multiple of 8 (1000/64 = 15 → 8)
		{1_000_123, 1, 999_424}, // ~1e6 back: a multiple of 8192
	} {
		got := estimateArrival(c.arrival, c.head)
		assert.Equal(t, c.want, got, "%+v", c)
		assert.LessOrEqual(t, got, c.arrival)
		if c.head > 0 {
			assert.LessOrEqual(t, c.arrival-got, max(0, (c.arrival-c.head)/64), "%+v", c)
		}
	}
}
