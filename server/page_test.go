package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
)

const shop = "https://shop.example"

func pageEnv(t *testing.T, mod ...func(*Options)) *env {
	return newEnv(t, visitorMode(append([]func(*Options){func(o *Options) { o.ReturnOrigins = []string{shop} }}, mod...)...))
}

func (e *env) page(room, ret, cookie string) resp {
	e.t.Helper()
	path := "/wait/" + room
	if ret != "" {
		path += "?room=" + room + "&reason=missing&return=" + url.QueryEscape(ret)
	}
	var hdr map[string]string
	if cookie != "" {
		hdr = withCookie(VisitorHostCookie, cookie)
	}
	return e.do(req{method: "GET", path: path, hdr: hdr})
}

func assertPageHeaders(t *testing.T, r resp) {
	t.Helper()
	csp := r.header.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		assert.Contains(t, csp, d)
	}
	assert.NotContains(t, csp, "unsafe-inline")
	assert.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	assert.Equal(t, "same-origin", r.header.Get("Referrer-Policy"))
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
	assert.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"))
	body := string(r.body)
	// Nothing the CSP would block: no handlers or style attributes, and
	// an inline script or style only as the CSP allows it (its SHA-256).
	assert.NotRegexp(t, `(?i)\sstyle=|\son[a-z]+=`, body)
	for _, m := range regexp.MustCompile(`(?s)<(script|style)( type="module")?>(.*?)</(?:script|style)>`).FindAllStringSubmatch(body, -1) {
		sum := sha256.Sum256([]byte(m[3]))
		assert.Contains(t, csp, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'", "an inline %s the CSP does not allow", m[1])
	}
}

func dataAttr(t *testing.T, body []byte, name string) string {
	t.Helper()
	m := regexp.MustCompile(`data-` + name + `="([^"]*)"`).FindSubmatch(body)
	require.NotNil(t, m, "no data-%s in %s", name, body)
	return string(m[1])
}

func TestPageWaiting(t *testing.T) {
	e := pageEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	first := e.page(room, "", "")
	require.Equal(t, 200, first.status, "%s", first.body)
	assert.Equal(t, "active", dataAttr(t, first.body, "state"))

	r := e.page(room, shop+"/cart", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	assertPageHeaders(t, r)
	body := string(r.body)
	assert.Equal(t, "waiting", dataAttr(t, r.body, "state"))
	assert.Equal(t, "1", dataAttr(t, r.body, "position"))
	assert.Contains(t, body, `<dd id="position">1</dd>`)
	assert.Contains(t, body, `<dd id="ahead">0</dd>`)
	assert.Regexp(t, `<noscript><meta http-equiv="refresh" content="[1-9][0-9]*"></noscript>`, body)
	assert.Regexp(t, `aria-live="polite"`, body)
	// One round trip: the script (the client bundled in) and the styles inline.
	assert.Contains(t, body, `<script type="module">`+inlineScript+`</script>`)
	assert.Contains(t, body, `<style>`+inlineStyle+`</style>`)
	tok := dataAttr(t, r.body, "token")
	require.True(t, strings.HasPrefix(tok, "fgw2_"), tok)
	v := visitorCookie(t, r, true)

	// A reload (same visitor) keeps the place and the token.
	again := e.page(room, "", v)
	assert.Equal(t, tok, dataAttr(t, again.body, "token"))
	assert.Equal(t, "1", dataAttr(t, again.body, "position"))
	assert.Empty(t, again.cookies()[VisitorHostCookie], "a valid visitor keeps its cookie")
}

func TestPageActiveReturn(t *testing.T) {
	clk := testkit.NewClock(testkit.Epoch)
	e := newEnv(t, withClock(clk.Now), visitorMode(func(o *Options) { o.ReturnOrigins = []string{shop} }))
	e.srv.now = clk.Now
	room := e.room(issuer.RoomConfig{Capacity: 5, SessionDuration: 5 * time.Minute})

	r := e.page(room, "https://SHOP.example:443/cart?x=1", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	assertPageHeaders(t, r)
	assert.Equal(t, "active", dataAttr(t, r.body, "state"))
	assert.Equal(t, shop+"/cart?x=1", dataAttr(t, r.body, "return"))
	assert.Contains(t, string(r.body), `<button type="submit" id="continue-button">`)
	assert.Contains(t, r.header.Get("Content-Security-Policy"), "form-action 'self' "+shop+";")
	assert.NotContains(t, string(r.body), "http-equiv=\"refresh\"")

	for _, evil := range []string{"https://evil.example/", "//evil.example", "javascript:alert(1)", "https://shop.example@evil.example/"} {
		r := e.page(room, evil, "")
		require.Equal(t, 200, r.status)
		assert.Equal(t, "", dataAttr(t, r.body, "return"), evil)
		assert.NotContains(t, string(r.body), "evil.example", evil)
		assert.Contains(t, string(r.body), `<a href="/">`, evil)
	}

	// Without JavaScript: the continue form exchanges, sets the admission
	// cookie and sends the shopper back with a 303.
	v := visitorCookie(t, r, true)
	clk.Advance(1500 * time.Millisecond)
	form := url.Values{"waiting_token": {dataAttr(t, r.body, "token")}, "return": {shop + "/cart?x=1"}}
	c := e.do(req{method: "POST", path: "/wait/" + room + "/continue", body: form.Encode(),
		ctype: "application/x-www-form-urlencoded", hdr: withCookie(VisitorHostCookie, v)})
	require.Equal(t, 303, c.status, "%s", c.body)
	assert.Equal(t, shop+"/cart?x=1", c.header.Get("Location"))
	require.NotNil(t, c.cookies()[AdmissionCookie])
	assert.NotEmpty(t, c.cookies()[AdmissionCookie].Value)

	// Another visitor with this token: refused, as a page (never a 500).
	c = e.do(req{method: "POST", path: "/wait/" + room + "/continue", body: form.Encode(),
		ctype: "application/x-www-form-urlencoded"})
	assert.Equal(t, 403, c.status, "%s", c.body)
	assert.Equal(t, "text/html; charset=utf-8", c.header.Get("Content-Type"))
	assert.Equal(t, "error", dataAttr(t, c.body, "state"))
}

func TestPageClosedUnknownPaused(t *testing.T) {
	e := pageEnv(t)
	ctx := context.Background()
	closed := e.room(issuer.RoomConfig{State: issuer.RoomClosed})
	r := e.page(closed, "", "")
	assert.Equal(t, 403, r.status)
	assertPageHeaders(t, r)
	assert.Equal(t, "closed", dataAttr(t, r.body, "state"))
	assert.Contains(t, string(r.body), "This sale has ended", "closed without a reason: reason closed (TestPageShowsTheEnd: sold out)")

	r = e.page("no-such-room-"+strings.ReplaceAll(t.Name(), "/", "-"), "", "")
	assert.Equal(t, 404, r.status)
	assertPageHeaders(t, r)
	assert.Equal(t, "unknown", dataAttr(t, r.body, "state"))

	paused := e.room(issuer.RoomConfig{State: issuer.RoomPaused})
	r = e.page(paused, "", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "paused", dataAttr(t, r.body, "state"))
	assert.Contains(t, string(r.body), "unknown") // estimated wait

	// Before the event window opens: "opens" with the time.
	opens := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	win := e.room(issuer.RoomConfig{})
	_, _, err := e.is.UpdateRoom(ctx, win, issuer.RoomPatch{Opens: &opens})
	require.NoError(t, err)
	r = e.page(win, "", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "opens", dataAttr(t, r.body, "state"))
	assert.Equal(t, opens.UnixMilli(), mustInt(t, dataAttr(t, r.body, "opens-at")))

	// Closing a room people wait in: sold out.
	_, err = e.is.SetState(ctx, paused, issuer.RoomClosed)
	require.NoError(t, err)
	r = e.page(paused, "", visitorCookie(t, e.page(paused, "", ""), true))
	assert.Contains(t, []string{"closed"}, dataAttr(t, r.body, "state"), "%s", r.body)
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		require.True(t, c >= '0' && c <= '9', s)
		n = n*10 + int64(c-'0')
	}
	return n
}

func TestPageAssets(t *testing.T) {
	e := pageEnv(t)
	for path, ctype := range map[string]string{
		"/wait/assets/wait.js":  "text/javascript; charset=utf-8",
		"/wait/assets/wait.css": "text/css; charset=utf-8",
		"/flashgate-client.js":  "text/javascript; charset=utf-8",
	} {
		r := e.do(req{method: "GET", path: path})
		require.Equal(t, 200, r.status, path)
		assert.Equal(t, ctype, r.header.Get("Content-Type"), path)
		assert.Equal(t, assetMaxAge, r.header.Get("Cache-Control"), path)
	}
}

// TestPageSizeBudget: page + script + styles (+ the client it imports) ≤ 30 KB gzipped.
func TestPageSizeBudget(t *testing.T) {
	e := pageEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	var all bytes.Buffer
	all.Write(e.page(room, shop+"/x", "").body)
	for _, b := range [][]byte{mustRead("page/wait.js"), mustRead("page/wait.css"), clientJS} {
		all.Write(b)
	}
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	_, _ = w.Write(all.Bytes())
	require.NoError(t, w.Close())
	t.Logf("waiting page: %d bytes, %d gzipped", all.Len(), z.Len())
	assert.LessOrEqual(t, z.Len(), 30_000)
}

func TestPageDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, PageTemplate),
		[]byte(`<!doctype html><title>Acme queue</title><main id="fg" data-state="{{.State}}">Acme: {{.Heading}} {{.Position}}</main>`), 0o644))
	e := pageEnv(t, func(o *Options) { o.PageDir = dir })
	room := e.room(issuer.RoomConfig{Capacity: 5})
	r := e.page(room, "", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "Acme: It’s your turn")
	assertPageHeaders(t, r)

	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, PageTemplate), []byte(`{{.Heading`), 0o644))
	err := Options{PageDir: bad}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PageDir")
	assert.Contains(t, err.Error(), "does not parse")

	missingField := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(missingField, PageTemplate), []byte(`{{.NoSuchField}}`), 0o644))
	require.ErrorContains(t, Options{PageDir: missingField}.Validate(), "sample page")
	require.ErrorContains(t, Options{PageDir: t.TempDir()}.Validate(), "PageDir")

	ring := newTestRing(t)
	_, err = New(Options{Issuer: e.is, Keys: ring, PageDir: bad})
	require.ErrorContains(t, err, "does not parse")
}

func TestPageHeaderModeNoUser(t *testing.T) {
	e := newEnv(t)
	room := e.room(issuer.RoomConfig{})
	r := e.do(req{method: "GET", path: "/wait/" + room})
	assert.Equal(t, 401, r.status)
	assertPageHeaders(t, r)
	assert.Equal(t, "error", dataAttr(t, r.body, "state"))
}

func TestPageByQuery(t *testing.T) {
	e := pageEnv(t)
	r := e.do(req{method: "GET", path: "/wait?room=sku-1&reason=missing&return=" + url.QueryEscape(shop+"/p")})
	require.Equal(t, 302, r.status)
	assert.Equal(t, "/wait/sku-1?room=sku-1&reason=missing&return="+url.QueryEscape(shop+"/p"), r.header.Get("Location"))
	r = e.do(req{method: "GET", path: "/wait?room=%3Cx%3E"})
	assert.Equal(t, 400, r.status)
	assert.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"))
}

// TestPageUnknownRoomEchoesNothing: /wait/<any text> of a room that does
// not exist answers 404 with a generic title and no trace of the text
// (issue 23 §6: a link could put any words in the tab's title); a room
// that exists is named.
func TestPageUnknownRoomEchoesNothing(t *testing.T) {
	e := pageEnv(t)
	for _, text := range []string{"CALL-0800-SUPPORT-NOW", "Your%20account%20is%20locked"} {
		r := e.do(req{method: "GET", path: "/wait/" + text})
		assert.Contains(t, []int{400, 404}, r.status, text)
		assertPageHeaders(t, r)
		assert.Equal(t, "unknown", dataAttr(t, r.body, "state"))
		assert.Contains(t, string(r.body), "<title>No such waiting room</title>", text)
		assert.Equal(t, "", dataAttr(t, r.body, "name"))
		assert.NotContains(t, string(r.body), text)
		assert.NotContains(t, string(r.body), "account is locked")
	}
	assert.Equal(t, 404, e.do(req{method: "GET", path: "/wait/CALL-0800-SUPPORT-NOW"}).status)
	room := e.room(issuer.RoomConfig{Capacity: 1})
	r := e.page(room, "", "")
	assert.Contains(t, string(r.body), "<title>It’s your turn · "+room+"</title>")
	assert.Equal(t, room, dataAttr(t, r.body, "name"))
}
