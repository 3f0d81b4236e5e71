package server

import (
	"math/bits"
	"net/url"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
)

// The waiting page without JavaScript on the room beacon (issue 34 §3;
// docs/browser.md#the-room-beacon). A page without script cannot read the
// beacon, so the issuer reads it for it: while the issuer asks pages to
// poll the beacon (Options.Beacon) and the buyer is far from the head,
// the personal page's meta refresh leads to a shared estimate page,
// GET /wait/{room}/estimate?arrival=Q, which holds no user, cookie or token
// and is cacheable like the beacon (public, max-age=1): buyers whose
// arrival numbers round to the same Q get the same bytes, from the CDN.
// It shows the place the beacon gives Q (≈, estimated), reloads every
// EstimateRefresh, and sends the buyer back to the personal page (303, the
// exact place, the admission) once the beacon places Q within near_head
// of the front, cannot place it, or the room closed.

// EstimateRefresh is how often the shared estimate page reloads.
const EstimateRefresh = 5 * time.Second

// estimateArrival is the arrival number a buyer's estimate page is for:
// arrival rounded down to a power of two at most 1/64 of its distance from
// the head (1 within 128 of it), so that ~1.6 % of the distance is the
// most the rounding adds to the beacon's error, and the thousands of
// buyers far back share a few hundred URLs. Rounding down errs early: the
// page of Q reaches near_head no later than the buyer's own place.
func estimateArrival(arrival, head int64) int64 {
	d := arrival - head
	if head <= 0 || d < 128 {
		return arrival
	}
	g := int64(1) << (bits.Len64(uint64(d/64)) - 1)
	return arrival - arrival%g
}

// waitURL is the buyer's own waiting page, with the page's language and
// return URL (validated).
func waitURL(room, lang, ret string) string {
	q := url.Values{}
	if lang != "" {
		q.Set("lang", lang)
	}
	if ret != "" {
		q.Set("return", ret)
	}
	u := "/wait/" + url.PathEscape(room)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// estimateURL is the shared estimate page of arrival number q.
func estimateURL(room string, q int64, lang, ret string) string {
	v := url.Values{}
	v.Set("arrival", strconv.FormatInt(q, 10))
	if lang != "" {
		v.Set("lang", lang)
	}
	if ret != "" {
		v.Set("return", ret)
	}
	return "/wait/" + url.PathEscape(room) + "/estimate?" + v.Encode()
}

// beaconRefresh points a personal page's meta refresh at its estimate page
// when the issuer asks pages to poll the beacon (v.Beacon) and e is a
// public entry farther from the front than the beacon's near_head (the
// URL is made in renderPage, once the language is known).
func (s *Server) beaconRefresh(c *fiber.Ctx, v *PageView, e *issuer.Entry) {
	if !v.Beacon || !v.HasPlace || e.Lane != flashgate.LanePublic || e.RoomState == issuer.RoomClosed || e.Arrival <= 0 {
		return
	}
	if _, b, err := s.beacon(c.UserContext(), v.Room); err == nil && b.Head > 0 && e.Position > b.NearHead {
		v.estimate = estimateArrival(e.Arrival, b.Head)
		// The estimate page costs the origin nothing per buyer: go soon.
		v.Refresh = min(v.Refresh, int(EstimateRefresh/time.Second))
	}
}

// GET /wait/:room/estimate?arrival=Q: the shared estimate page (above).
// Answers: the page (200, public, max-age=1, no cookie, no Vary on the
// buyer's headers: the language is ?lang's), 303 to the personal page when
// the beacon does not place Q far from the front, and the page's problems
// (400 invalid_input for a missing or malformed arrival, 404 unknown_room,
// 503) no-store.
func (s *Server) pageEstimate(c *fiber.Ctx) error {
	v := s.pageBase(c)
	v.accept, v.shared = "", true
	q, err := strconv.ParseInt(query(c, "arrival"), 10, 64)
	if err != nil || q <= 0 {
		return problemFor(string(flashgate.CodeInvalidInput), "arrival must be a positive arrival number")
	}
	_, claims, err := s.beacon(c.UserContext(), v.Room)
	if err != nil {
		return err
	}
	b := verifier.Beacon(claims)
	place, _, ok := b.Place(q)
	if !ok || place <= claims.NearHead || claims.State == string(issuer.RoomClosed) {
		c.Set(fiber.HeaderCacheControl, beaconCacheControl)
		return c.Redirect(waitURL(v.Room, v.override, v.Return), fiber.StatusSeeOther)
	}
	v.Name = v.Room
	if cfg, err := s.is.Room(c.UserContext(), v.Room); err == nil {
		v.brand(cfg)
	}
	v.HasPlace, v.Estimated = true, true
	v.Position, v.Ahead, v.TotalWaiting = place, place-1, claims.TotalWaiting
	v.Refresh = int(EstimateRefresh / time.Second)
	v.EstimateArrival, v.EstimateOf = q, waitURL(v.Room, v.override, v.Return)
	if claims.State == string(issuer.RoomPaused) {
		v.say(pagePaused, "paused", "")
	} else {
		v.say(pageWaiting, "waiting", "")
	}
	return s.renderPage(c, v)
}
