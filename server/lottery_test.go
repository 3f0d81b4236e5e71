package server

import (
	"bufio"
	"context"
	"encoding/json"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
)

// TestLotteryOverHTTP: a shuffle room set up by the admin API. Before the
// opening enter and status answer pre_queue with no position (every answer
// validated against openapi.json by e.do), the stats show the seed's
// commitment but not the seed; after the opening and a tick, positions are
// exact and the stats show the seed, cutoff and bits.
func TestLotteryOverHTTP(t *testing.T) {
	clk := testkit.NewClock(testkit.Epoch.Local())
	e := newEnv(t, withClock(clk.Now))
	room := e.room(issuer.RoomConfig{})
	opens := clk.Now().Add(time.Hour).UTC()
	r := e.admin("PUT", "/admin/rooms/"+room, `{"capacity":1,"pre_queue":"shuffle","opens_at":"`+opens.Format(time.RFC3339)+`"}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "shuffle", r.json(t)["pre_queue"])
	assert.Equal(t, "shuffle", r.json(t)["prequeue"], "the deprecated name, emitted for one release")
	assert.Equal(t, 400, e.admin("PUT", "/admin/rooms/"+room, `{"pre_queue":"random"}`).status)
	assert.Equal(t, 400, e.admin("PUT", "/admin/rooms/"+room, `{"prequeue":"random"}`).status)
	e.admin("PUT", "/admin/rooms/"+room, `{"pre_queue":"shuffle","prequeue":"fifo"}`).problem(t, 400, "invalid_input")
	// The old spelling is still read on input.
	r = e.admin("PUT", "/admin/rooms/"+room, `{"prequeue":"shuffle"}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "shuffle", r.json(t)["pre_queue"])

	view := func() map[string]any {
		r := e.do(req{method: "GET", path: "/v1/rooms/" + room}) // public: no user, no token
		require.Equal(t, 200, r.status, "%s", r.body)
		return r.json(t)
	}
	v := view()
	assert.Equal(t, "shuffle", v["pre_queue"])
	assert.Equal(t, "shuffle", v["prequeue"], "the deprecated name, emitted for one release")
	pub := v["lottery"].(map[string]any)
	commitment := pub["commitment"].(string)
	assert.Len(t, commitment, 64, "SHA-256, public before the draw")
	assert.Len(t, pub["commitment_sha1"], 40)
	assert.Equal(t, false, pub["drawn"])
	assert.NotContains(t, pub, "seed")

	toks, receipts := map[string]string{}, map[string]string{}
	for _, u := range []string{"u1", "u2", "u3", "u4"} {
		en := e.enter(room, u)
		assert.Equal(t, "WAITING", en["state"])
		assert.Equal(t, true, en["pre_queue"])
		assert.NotContains(t, en, "position")
		assert.NotContains(t, en, "ahead")
		assert.EqualValues(t, -1, en["estimated_wait_ms"])
		assert.Equal(t, commitment, en["lottery_commitment"])
		toks[u], receipts[u] = en["waiting_token"].(string), en["receipt"].(string)
	}
	status := func(user string) map[string]any {
		r := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", user: user, bearer: toks[user]})
		require.Equal(t, 200, r.status, "%s", r.body)
		return r.json(t)
	}
	s2 := status("u2")
	assert.Equal(t, true, s2["pre_queue"])
	assert.Equal(t, commitment, s2["lottery_commitment"])
	assert.NotEmpty(t, s2["receipt"])
	// The event stream's status events carry them too.
	stream := openStream(t, e.listen()+"/v1/rooms/"+room+"/events?waiting_token="+toks["u3"], "u3")
	require.Equal(t, 200, stream.StatusCode)
	ev, err := readEvent(bufio.NewReader(stream.Body))
	require.NoError(t, err)
	var sev map[string]any
	require.NoError(t, json.Unmarshal([]byte(ev.data), &sev))
	assert.Equal(t, commitment, sev["lottery_commitment"])
	assert.NotEmpty(t, sev["receipt"])
	require.NoError(t, stream.Body.Close())
	lot := e.admin("GET", "/admin/rooms/"+room+"/stats", "").json(t)["lottery"].(map[string]any)
	assert.Equal(t, false, lot["drawn"])
	assert.Len(t, lot["commitment"], 40)
	assert.NotContains(t, lot, "seed", "secret before the draw")

	clk.Set(opens)
	_, err = e.is.Tick(context.Background(), room)
	require.NoError(t, err)
	places := map[float64]bool{}
	for u := range toks {
		s := status(u)
		assert.NotContains(t, s, "pre_queue")
		if s["state"] == "WAITING" {
			places[s["position"].(float64)] = true
		}
	}
	assert.Len(t, places, 3, "three distinct places after one admission")
	for u := range toks {
		assert.NotContains(t, status(u), "receipt", "placed: no pre-queue, no receipt")
	}
	v = view()
	pub = v["lottery"].(map[string]any)
	assert.Equal(t, true, pub["drawn"])
	assert.Equal(t, commitment, pub["commitment"])
	assert.EqualValues(t, 4, pub["cutoff"])
	lv, err := e.is.RoomLottery(context.Background(), room)
	require.NoError(t, err)
	assert.Equal(t, lv.Seed, pub["seed"])
	assert.Equal(t, lv.Epoch, v["epoch"])
	for u, rc := range receipts {
		c, err := issuer.VerifyReceipt(context.Background(), rc, e.ring, *lv)
		require.NoError(t, err, u)
		if st := status(u); st["state"] == "WAITING" {
			assert.EqualValues(t, c.Place-1, st["position"], u)
		}
	}
	st := e.admin("GET", "/admin/rooms/"+room+"/stats", "").json(t)
	lot = st["lottery"].(map[string]any)
	assert.Equal(t, true, lot["drawn"])
	assert.Len(t, lot["seed"], 32)
	assert.EqualValues(t, 4, lot["cutoff"])
	assert.EqualValues(t, 3, lot["bits"])
	assert.EqualValues(t, 4, lot["placed"])
	assert.EqualValues(t, opens.UnixMilli(), lot["drawn_at_ms"])
	assert.EqualValues(t, opens.UnixMilli(), lot["placed_at_ms"])
	assert.Equal(t, "shuffle", st["config"].(map[string]any)["pre_queue"])

	fifo := e.room(issuer.RoomConfig{})
	assert.NotContains(t, e.do(req{method: "GET", path: "/v1/rooms/" + fifo}).json(t), "lottery")
	assert.Equal(t, 404, e.do(req{method: "GET", path: "/v1/rooms/no-such-room-" + fifo}).status)
	st = e.admin("GET", "/admin/rooms/"+fifo+"/stats", "").json(t)
	assert.NotContains(t, st, "lottery", "a fifo room has none")
	assert.Equal(t, "fifo", st["config"].(map[string]any)["pre_queue"])
}

// TestPagePreQueue: the waiting page of a pre-queue entry says that places
// are drawn at opening, shows no place, and marks itself for wait.js.
func TestPagePreQueue(t *testing.T) {
	e := pageEnv(t)
	opens := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	room := e.room(issuer.RoomConfig{Opens: opens, PreQueue: issuer.PreQueueShuffle})
	r := e.page(room, "", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	assertPageHeaders(t, r)
	body := string(r.body)
	assert.Equal(t, "opens", dataAttr(t, r.body, "state"))
	assert.Equal(t, "1", dataAttr(t, r.body, "pre-queue"))
	assert.NotContains(t, body, "data-position=")
	assert.Contains(t, body, `<dd id="position">drawn at opening</dd>`)
	assert.Contains(t, body, "When the sale opens, places are drawn at random")

	fifo := e.room(issuer.RoomConfig{Opens: opens})
	r = e.page(fifo, "", "")
	assert.False(t, strings.Contains(string(r.body), "data-pre-queue"), "a fifo room has no pre-queue")
}

// TestPagePreQueueReceipt: the waiting page of a pre-queue entry shows the
// room's lottery commitment and offers the join receipt as a JSON file
// download (a data: URL: no script, nothing the page's CSP blocks), the
// same receipt the JSON API gives; once placed, neither is shown.
func TestPagePreQueueReceipt(t *testing.T) {
	clk := testkit.NewClock(testkit.Epoch.Local())
	e := newEnv(t, withClock(clk.Now), visitorMode())
	room := e.room(issuer.RoomConfig{})
	opens := clk.Now().Add(time.Hour).UTC()
	r := e.admin("PUT", "/admin/rooms/"+room, `{"capacity":1,"pre_queue":"shuffle","opens_at":"`+opens.Format(time.RFC3339)+`"}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	e.do(req{method: "GET", path: "/wait/" + room}) // someone ahead, so the visitor below still waits after the opening
	p := e.page(room, "", "")
	require.Equal(t, 200, p.status, "%s", p.body)
	assertPageHeaders(t, p)
	lv, err := e.is.RoomLottery(context.Background(), room)
	require.NoError(t, err)
	body := string(p.body)
	assert.Contains(t, body, `The draw’s secret seed was published in advance as this fingerprint (SHA-256): <code id="commitment">`+lv.Commitment+`</code>`)
	assert.Contains(t, body, `<p id="lottery-note">Keep your receipt`, "the page says to keep it (issue 36)")
	assert.Contains(t, body, `The operator chose this draw’s seed (no public beacon)`, "and that the seed is operator-chosen without a beacon")
	m := regexp.MustCompile(`<a id="receipt" href="data:application/json;charset=utf-8,([^"]+)" download="flashgate-receipt-` +
		regexp.QuoteMeta(room) + `.json">`).FindStringSubmatch(body)
	require.NotNil(t, m, "%s", body)
	raw, err := url.PathUnescape(html.UnescapeString(m[1]))
	require.NoError(t, err)
	var doc struct {
		Receipt           string `json:"receipt"`
		Room              string `json:"room"`
		Arrival           int64  `json:"arrival"`
		LotteryCommitment string `json:"lottery_commitment"`
		RoomView          string `json:"room_view"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &doc), raw)
	assert.Equal(t, room, doc.Room)
	assert.Equal(t, lv.Commitment, doc.LotteryCommitment)
	assert.Equal(t, "/v1/rooms/"+room, doc.RoomView)
	require.NotEmpty(t, doc.Receipt)

	clk.Set(opens)
	_, err = e.is.Tick(context.Background(), room)
	require.NoError(t, err)
	lv, err = e.is.RoomLottery(context.Background(), room)
	require.NoError(t, err)
	c, err := issuer.VerifyReceipt(context.Background(), doc.Receipt, e.ring, *lv)
	require.NoError(t, err, "the downloaded receipt proves the drawn place")
	assert.EqualValues(t, 2, c.Claims.Arrival)
	assert.EqualValues(t, 2, doc.Arrival)
	after := e.page(room, "", visitorCookie(t, p, true))
	assert.NotContains(t, string(after.body), `id="receipt"`, "placed: no pre-queue")
}
