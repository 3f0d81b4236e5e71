package browser_test

import (
	"crypto/rand"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// TestBrowserRoomNews: an admin call reaches an open waiting page without a
// reload (issue 34 §2, issue 35 §3): an edited page_message replaces the
// page's message area, a pause shows "paused", an open the place again and
// a sold out "Sold out", each within a generous 5 s bound.
// Fails on 9601677: status events carried no page_message, so an open page
// kept the message it was rendered with.
func TestBrowserRoomNews(t *testing.T) {
	br := launchBrowser(t)
	bin := buildFlashgate(t)
	rs := redistest.Start(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	is := startIssuer(t, bin, map[string]string{
		"REDIS_URL":                  "redis://" + rs.Addr + "/0",
		"FLASHGATE_KEYS_FILE":        filepath.Join(t.TempDir(), "keys.json"),
		"FLASHGATE_ADMIN_TOKEN":      adminToken,
		"FLASHGATE_IDENTITY":         "visitor",
		"FLASHGATE_VISITOR_KEY":      base64.StdEncoding.EncodeToString(key),
		"FLASHGATE_INSECURE_COOKIES": "true",
		"FLASHGATE_LOG_LEVEL":        "warn",
	})
	room := redistest.Room("news")
	admin(t, is.base, "PUT", "/admin/rooms/"+room, `{"capacity":1,"rate_per_minute":6000,"tick_ms":100,"state":"open",`+
		`"page_title":"Spring drop","page_message":"One pair per customer."}`)
	other := newBuyer(t, "ahead", is.base, room) // holds the one place: the page waits
	other.enter(t)

	br.newContext("buyer", true)
	br.newPage("buyer", "b")
	status, _ := br.goTo("b", is.base+"/wait/"+room+"?lang=en")
	require.Equal(t, 200, status)
	v := waitFor(t, br, "b", "the waiting page, live", 10*time.Second, func(v view) bool { return v.state() == "waiting" && v.Ready != nil })
	assert.Contains(t, v.Body, "One pair per customer.")

	const within = 5 * time.Second
	admin(t, is.base, "PUT", "/admin/rooms/"+room, `{"page_message":"Restock at noon: [details](https://shop.example/restock)"}`)
	v = waitFor(t, br, "b", "the edited message, live", within, func(v view) bool {
		return strings.Contains(v.Body, "Restock at noon: details")
	})
	assert.NotContains(t, v.Body, "One pair per customer.")
	assert.Equal(t, "waiting", v.state())

	admin(t, is.base, "POST", "/admin/rooms/"+room+"/pause", "{}")
	waitFor(t, br, "b", "paused", within, func(v view) bool { return v.state() == "paused" })
	admin(t, is.base, "POST", "/admin/rooms/"+room+"/open", "{}")
	waitFor(t, br, "b", "waiting again", within, func(v view) bool { return v.state() == "waiting" })
	admin(t, is.base, "POST", "/admin/rooms/"+room+"/sold-out", "{}")
	waitFor(t, br, "b", "sold out", within, func(v view) bool {
		return (v.state() == "soldout" || v.state() == "closed") && v.heading() == "Sold out"
	})
}
