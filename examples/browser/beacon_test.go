package browser_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// TestBrowserRoomBeacon: with FLASHGATE_BEACON=always the waiting page, far
// back in line, places itself from the room beacon ("≈ n"), and its place
// follows the buyers ahead who leave, without a stream (issue 34 §3).
func TestBrowserRoomBeacon(t *testing.T) {
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
		"FLASHGATE_BEACON":           "always",
	})
	room := redistest.Room("beacon")
	admin(t, is.base, "PUT", "/admin/rooms/"+room, `{"capacity":1,"rate_per_minute":60,"state":"open"}`)
	ahead := make([]*buyer, 120) // the first holds the one place, the others wait ahead of the page
	for i := range ahead {
		ahead[i] = newBuyer(t, "ahead-"+strconv.Itoa(i), is.base, room)
		ahead[i].enter(t)
	}

	br.newContext("buyer", true)
	br.newPage("buyer", "b")
	status, _ := br.goTo("b", is.base+"/wait/"+room+"?lang=en")
	require.Equal(t, 200, status)
	// A buyer without JavaScript, behind it: its page's meta refresh leads
	// to the shared estimate page (pageestimate.go), which places it from
	// the beacon too.
	br.newContext("nojs", false)
	br.newPage("nojs", "n")
	status, _ = br.goTo("n", is.base+"/wait/"+room+"?lang=en")
	require.Equal(t, 200, status)
	nv := waitForNoJS(t, br, "n", "the estimate page", 15*time.Second, func(v view) bool {
		return strings.Contains(v.URL, "/wait/"+room+"/estimate?") && strings.HasPrefix(v.position(), "≈")
	})
	require.NotContains(t, nv.Body, "fgw", "the shared page carries no waiting token")
	place := func(v view) int {
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(v.position(), "≈")))
		if err != nil {
			return -1
		}
		return n
	}
	v := waitFor(t, br, "b", "placed from the beacon", 10*time.Second, func(v view) bool {
		return v.state() == "waiting" && strings.HasPrefix(v.position(), "≈")
	})
	require.Equal(t, 120, place(v), "119 wait ahead, and nobody left: the beacon's place is exact")

	for _, b := range ahead[1:41] {
		st, _, err := b.call(http.MethodPost, "/v1/rooms/"+room+"/leave", b.waiting)
		require.NoError(t, err)
		require.Equal(t, http.StatusNoContent, st)
	}
	v = waitFor(t, br, "b", "the leaves ahead, from the beacon", 10*time.Second, func(v view) bool {
		return strings.HasPrefix(v.position(), "≈") && place(v) < 120
	})
	require.InDelta(t, 80, place(v), 40, "within its bucket's leaves of the exact place (80)")

	// 40 more leave: the page without JavaScript (exact place 41) is near
	// the front, and its estimate page sends it back to its own page,
	// which shows the exact place.
	for _, b := range ahead[41:81] {
		st, _, err := b.call(http.MethodPost, "/v1/rooms/"+room+"/leave", b.waiting)
		require.NoError(t, err)
		require.Equal(t, http.StatusNoContent, st)
	}
	nv = waitForNoJS(t, br, "n", "back on its own page near the front", 20*time.Second, func(v view) bool {
		return !strings.Contains(v.URL, "/estimate") && v.state() == "waiting" && v.position() == "41"
	})
	require.Contains(t, strings.Join(br.history("n"), " "), "/estimate?", "it went by the estimate page")
}
