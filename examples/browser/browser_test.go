package browser_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// TestBrowserShopperPath: a shopper in Chromium opens a product page on
// the shop's edge worker, is sent to flashgate's waiting page, watches its
// place fall while the buyers ahead of it are served, is admitted and
// lands back on the product through the worker, which tells the shop who
// the shopper is. Then: a second tab keeps the same place, an issuer crash
// and restart mid-wait loses no place, a tampered admission cookie sends
// the browser back to the waiting page, a shopper without JavaScript gets
// through by the meta refresh and the Continue form, an invite link is left
// unused by a link scanner and used by the invited shopper's button (under
// the page's CSP), and a sold-out room shows sold out.
func TestBrowserShopperPath(t *testing.T) {
	start := time.Now()
	shots := screenshotDir(t)
	br := launchBrowser(t)
	bin := buildFlashgate(t)

	rs := redistest.Start(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	origin := newShop(t)

	// The worker needs the issuer's address and the issuer the worker's
	// origin (FLASHGATE_RETURN_ORIGINS): reserve the worker's port first.
	// Both on 127.0.0.1: cookies are not port-scoped, so the admission
	// cookie the issuer sets reaches the worker.
	env := map[string]string{
		"REDIS_URL":                  "redis://" + rs.Addr + "/0",
		"FLASHGATE_KEYS_FILE":        filepath.Join(t.TempDir(), "keys.json"),
		"FLASHGATE_ADMIN_TOKEN":      adminToken,
		"FLASHGATE_IDENTITY":         "visitor",
		"FLASHGATE_VISITOR_KEY":      base64.StdEncoding.EncodeToString(key),
		"FLASHGATE_INSECURE_COOKIES": "true",
		"FLASHGATE_LOG_LEVEL":        "warn",
	}
	workerPort := redistest.FreePort(t)
	workerOrigin := "http://127.0.0.1:" + strconv.Itoa(workerPort)
	env["FLASHGATE_RETURN_ORIGINS"] = workerOrigin
	is := startIssuer(t, bin, env)
	worker := startWorker(t, workerPort, strings.TrimPrefix(is.base, "http://"),
		strings.TrimPrefix(origin.srv.URL, "http://"), is.base+"/wait")
	require.Equal(t, workerOrigin, worker)

	room := redistest.Room("sneakers")
	admin(t, is.base, "PUT", "/admin/rooms/"+room,
		`{"capacity":1,"rate_per_minute":6000,"session_ms":20000,"tick_ms":100,"state":"open"}`)
	product := worker + "/products/" + room + "/red-42?size=42"
	waitPrefix := is.base + "/wait/" + room

	// The crowd ahead: the first buyer takes the only place, two wait.
	crowd := make([]*buyer, 3)
	for i := range crowd {
		crowd[i] = newBuyer(t, "buyer"+strconv.Itoa(i), is.base, room)
		crowd[i].enter(t)
	}

	// 1. The product URL sends the browser to the waiting page.
	br.newContext("shopper", true)
	br.newPage("shopper", "tab1")
	_, landed := br.goTo("tab1", product)
	require.True(t, strings.HasPrefix(landed, waitPrefix), "not sent to the waiting page: %s", landed)
	u, err := url.Parse(landed)
	require.NoError(t, err)
	require.Equal(t, product, u.Query().Get("return"))
	require.Equal(t, "missing", u.Query().Get("reason"))
	hist := br.history("tab1")
	require.Contains(t, hist, is.base+"/wait?room="+room+"&reason=missing&return="+url.QueryEscape(product),
		"the worker's redirect: %v", hist)
	v := waitFor(t, br, "tab1", "the first place", 10*time.Second, func(v view) bool {
		return v.state() == "waiting" && v.position() == "3"
	})
	br.screenshot("tab1", filepath.Join(shots, "01-waiting.png"))
	cookies := br.cookies("shopper")
	vc, ok := cookies["flashgate_visitor"]
	require.True(t, ok, "no visitor cookie: %v", cookies)
	require.True(t, vc.HTTPOnly)
	visitor := "v_" + strings.SplitN(vc.Value, ".", 2)[0]
	t.Logf("%s: %s at place %s", time.Since(start).Round(time.Millisecond), visitor, v.position())

	// 2. A second tab keeps the same place (one visitor, one place).
	br.newPage("shopper", "tab2")
	_, landed2 := br.goTo("tab2", product)
	require.True(t, strings.HasPrefix(landed2, waitPrefix), landed2)
	waitFor(t, br, "tab2", "the same place in a second tab", 10*time.Second, func(v view) bool {
		return v.state() == "waiting" && v.position() == "3"
	})
	br.screenshot("tab2", filepath.Join(shots, "02-second-tab.png"))
	br.must(nil, "closePage", map[string]any{"page": "tab2"})
	// Closing the second tab and reloading the first keep the place too (the
	// page sends no leave on pagehide: docs/browser.md#the-waiting-room-page).
	reloadBefore, err := br.view("tab1", true)
	require.NoError(t, err)
	require.NotEmpty(t, deref(reloadBefore.Token))
	br.must(nil, "reload", map[string]any{"page": "tab1"})
	reloadAfter := waitFor(t, br, "tab1", "the same place after a reload", 10*time.Second, func(v view) bool {
		return v.state() == "waiting" && v.position() == "3"
	})
	// The same entry, not a new one at the back: the same waiting token.
	require.Equal(t, deref(reloadBefore.Token), deref(reloadAfter.Token), "the reload gave the place up and entered again")

	// 3. The issuer crashes and restarts mid-wait: the page says it is
	// reconnecting, then shows the same place again.
	is.kill()
	if _, err := waitForErr(br, "tab1", 8*time.Second, func(v view) bool { return v.state() == "reconnecting" }); err == nil {
		br.screenshot("tab1", filepath.Join(shots, "03-reconnecting.png"))
	} else {
		t.Logf("the page did not show reconnecting while the issuer was down: %v", err)
	}
	is.start()
	waitFor(t, br, "tab1", "the same place after the restart", 20*time.Second, func(v view) bool {
		return v.state() == "waiting" && v.position() == "3"
	})
	require.Equal(t, vc.Value, br.cookies("shopper")["flashgate_visitor"].Value, "the visitor changed")
	t.Logf("%s: the place survived the issuer restart", time.Since(start).Round(time.Millisecond))

	// 4. The buyers ahead are served one by one: the place falls, then the
	// browser is admitted and goes back to the product through the worker.
	seen := []string{"3"}
	for i, b := range crowd {
		b.buy(t)
		want := strconv.Itoa(len(crowd) - 1 - i)
		if want == "0" {
			break
		}
		waitFor(t, br, "tab1", "place "+want, 10*time.Second, func(v view) bool { return v.position() == want })
		seen = append(seen, want)
		br.screenshot("tab1", filepath.Join(shots, "04-place-"+want+".png"))
	}
	require.Equal(t, []string{"3", "2", "1"}, seen)
	br.waitURL("tab1", product, 15*time.Second)
	v = waitFor(t, br, "tab1", "the shop page", 10*time.Second, func(v view) bool {
		return v.URL == product && strings.Contains(v.Body, visitor)
	})
	br.screenshot("tab1", filepath.Join(shots, "05-admitted-shop.png"))
	visits := origin.visits()
	require.NotEmpty(t, visits)
	last := visits[len(visits)-1]
	require.Equal(t, strings.TrimPrefix(product, worker), last.Path)
	require.Equal(t, visitor, last.User, "X-Flashgate-User")
	require.Equal(t, room, last.Product, "X-Flashgate-Product")
	ac, ok := br.cookies("shopper")["flashgate_admission"]
	require.True(t, ok, "no admission cookie")
	require.True(t, ac.HTTPOnly)
	t.Logf("%s: admitted and back on the product page (%s)", time.Since(start).Round(time.Millisecond), v.URL)

	// 5. A tampered admission cookie: the worker refuses it and sends the
	// browser to the waiting page (which, the admission still being live,
	// sets a good cookie and sends it back).
	before := len(origin.visits())
	tampered := ac
	sig := []byte(tampered.Value)
	i := len(sig) - 5
	if sig[i] == 'A' {
		sig[i] = 'B'
	} else {
		sig[i] = 'A'
	}
	tampered.Value = string(sig)
	br.addCookie("shopper", tampered)
	br.newPage("shopper", "tab3")
	br.goTo("tab3", product)
	hist = br.history("tab3")
	require.Contains(t, hist, is.base+"/wait?room="+room+"&reason=bad_signature&return="+url.QueryEscape(product),
		"the tampered cookie was not refused: %v", hist)
	br.waitURL("tab3", product, 15*time.Second)
	br.screenshot("tab3", filepath.Join(shots, "06-tampered-cookie-back-in.png")) // after the navigations settle
	for _, vis := range origin.visits()[before:] {
		require.Equal(t, visitor, vis.User)
	}
	require.NotEqual(t, tampered.Value, br.cookies("shopper")["flashgate_admission"].Value)
	br.must(nil, "closePage", map[string]any{"page": "tab3"})
	// The shop takes the order: the place is free for the next shopper.
	complete(t, is.base, room, br.cookies("shopper")["flashgate_admission"].Value)
	t.Logf("%s: tampered cookie refused", time.Since(start).Round(time.Millisecond))

	// 6. JavaScript off: the meta refresh follows the line, then the
	// Continue form exchanges and goes back to the product.
	ahead := newBuyer(t, "buyer-ahead", is.base, room)
	ahead.enter(t)
	waitActive(t, ahead)
	br.newContext("nojs", false)
	br.newPage("nojs", "nojs")
	_, landed = br.goTo("nojs", product)
	require.True(t, strings.HasPrefix(landed, waitPrefix), landed)
	v = waitForNoJS(t, br, "nojs", "the no-script waiting page", 10*time.Second, func(v view) bool {
		return v.state() == "waiting" && v.position() == "1"
	})
	br.screenshot("nojs", filepath.Join(shots, "07-nojs-waiting.png"))
	ahead.buy(t)
	waitForNoJS(t, br, "nojs", "the Continue button after a meta refresh", 15*time.Second, func(v view) bool {
		return v.state() == "active"
	})
	br.screenshot("nojs", filepath.Join(shots, "08-nojs-continue.png"))
	loads := 0
	for _, h := range br.history("nojs") {
		if strings.HasPrefix(h, waitPrefix) {
			loads++
		}
	}
	require.GreaterOrEqual(t, loads, 2, "no meta refresh: %v", br.history("nojs"))
	nojsVisitor := "v_" + strings.SplitN(br.cookies("nojs")["flashgate_visitor"].Value, ".", 2)[0]
	require.NotEqual(t, visitor, nojsVisitor)
	br.must(nil, "click", map[string]any{"page": "nojs", "selector": "#continue-button"})
	br.waitURL("nojs", product, 15*time.Second)
	v = waitForNoJS(t, br, "nojs", "the shop page", 10*time.Second, func(v view) bool {
		return strings.Contains(v.Body, nojsVisitor)
	})
	visits = origin.visits()
	require.Equal(t, nojsVisitor, visits[len(visits)-1].User)
	t.Logf("%s: without JavaScript: back on %s", time.Since(start).Round(time.Millisecond), v.URL)

	// 7. An invite link (issue 23 §4): a link scanner's GET and HEAD leave
	// the single-use invite unused; the invited shopper's browser shows the
	// confirmation, its button (a form POST, allowed by the page's CSP)
	// uses the invite, and the page then shows the priority line; the link
	// used again is refused.
	vip := redistest.Room("vip")
	admin(t, is.base, "PUT", "/admin/rooms/"+vip, `{"capacity":1,"rate_per_minute":6000,"session_ms":300000,"tick_ms":100,"state":"open"}`)
	holder := newBuyer(t, "holder", is.base, vip)
	require.Equal(t, "ACTIVE", holder.enter(t), "the holder takes the one place")
	invs := admin(t, is.base, "POST", "/admin/rooms/"+vip+"/invites", `{}`)["invites"].([]any)
	require.Len(t, invs, 1)
	require.Equal(t, true, invs[0].(map[string]any)["single_use"], "single use by default")
	link := is.base + "/wait/" + vip + "?invite=" + url.QueryEscape(invs[0].(map[string]any)["token"].(string))
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, err := http.NewRequest(method, link, nil)
		require.NoError(t, err)
		req.Header.Set("User-Agent", "LinkScanner/1.0")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, method)
	}
	require.EqualValues(t, 0, admin(t, is.base, "GET", "/admin/rooms/"+vip+"/stats", "")["invites_used"], "the scanner used the invite")
	br.newContext("invited", true)
	br.newPage("invited", "invited")
	br.goTo("invited", link)
	waitFor(t, br, "invited", "the invite's confirmation", 10*time.Second, func(v view) bool {
		return v.state() == "invited" && v.heading() == "You’re invited"
	})
	br.screenshot("invited", filepath.Join(shots, "09-invite-confirm.png"))
	br.must(nil, "click", map[string]any{"page": "invited", "selector": "#invite-button"})
	v = waitFor(t, br, "invited", "the priority line", 10*time.Second, func(v view) bool {
		return v.state() == "waiting" && v.heading() == "You are in the priority line" && v.position() == "1"
	})
	require.NotContains(t, v.URL, "invite=", "the page after the POST carries no invite")
	br.screenshot("invited", filepath.Join(shots, "10-invite-priority.png"))
	st := admin(t, is.base, "GET", "/admin/rooms/"+vip+"/stats", "")
	require.EqualValues(t, 1, st["invites_used"])
	require.EqualValues(t, 1, st["priority_waiting"])
	br.newContext("forwarded", true)
	br.newPage("forwarded", "forwarded")
	br.goTo("forwarded", link)
	br.must(nil, "click", map[string]any{"page": "forwarded", "selector": "#invite-button"})
	waitFor(t, br, "forwarded", "the used invite refused", 10*time.Second, func(v view) bool {
		return v.heading() == "This invitation cannot be used" && strings.Contains(v.Body, "already been used")
	})
	t.Logf("%s: invite link: unused by a scanner, used by its button", time.Since(start).Round(time.Millisecond))

	// 8. The room sells out: a new shopper sees sold out.
	admin(t, is.base, "POST", "/admin/rooms/"+room+"/sold-out", "")
	br.newContext("late", true)
	br.newPage("late", "late")
	status, landed := br.goTo("late", product)
	require.True(t, strings.HasPrefix(landed, waitPrefix), landed)
	require.Equal(t, 403, status)
	v = waitFor(t, br, "late", "sold out", 10*time.Second, func(v view) bool {
		return v.state() == "closed" && v.heading() == "Sold out"
	})
	br.screenshot("late", filepath.Join(shots, "11-sold-out.png"))
	t.Logf("%s: sold out; screenshots in %s", time.Since(start).Round(time.Millisecond), shots)
}

// screenshotDir is $FLASHGATE_SCREENSHOTS or build/screenshots.
func screenshotDir(t testing.TB) string {
	dir := os.Getenv("FLASHGATE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "build", "screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

func waitActive(t testing.TB, b *buyer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, m, err := b.call("GET", "/v1/rooms/"+b.room+"/status", b.waiting)
		if err == nil && st == 200 && m["state"] == "ACTIVE" {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s never admitted: %v %v", b.name, m, err)
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls the page until ok holds, and fails with the last view.
func waitFor(t testing.TB, br *browser, page, what string, d time.Duration, ok func(view) bool) view {
	t.Helper()
	v, err := waitForErr(br, page, d, ok)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func waitForErr(br *browser, page string, d time.Duration, ok func(view) bool) (view, error) {
	return poll(br, page, true, d, ok)
}

func waitForNoJS(t testing.TB, br *browser, page, what string, d time.Duration, ok func(view) bool) view {
	t.Helper()
	v, err := poll(br, page, false, d, ok)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func poll(br *browser, page string, js bool, d time.Duration, ok func(view) bool) (view, error) {
	deadline := time.Now().Add(d)
	var v view
	var err error
	for {
		// A navigation under way makes a read fail: try again.
		v, err = br.view(page, js)
		if err == nil && ok(v) {
			return v, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return v, err
			}
			return v, &timeoutError{v}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type timeoutError struct{ v view }

func (e *timeoutError) Error() string {
	return "timed out; the page shows: url " + e.v.URL + ", state " + e.v.state() + ", position " + e.v.position() +
		", heading " + e.v.heading() + "\n" + e.v.Body
}
