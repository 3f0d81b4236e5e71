package server

import (
	"math"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

// RoomConfig is the admin API's JSON form of issuer.RoomConfig.
type RoomConfig struct {
	Room          string `json:"room,omitempty"`
	Capacity      int    `json:"capacity"`
	RatePerMinute int    `json:"rate_per_minute"`
	// SessionMs is how long an admission lasts, in ms (whole seconds);
	// SessionSeconds is the same in seconds, its deprecated old name,
	// emitted for one release (CHANGELOG.md#deprecated).
	SessionMs      int64  `json:"session_ms"`
	SessionSeconds int64  `json:"session_seconds"`
	TickMs         int64  `json:"tick_ms"`
	TickBatch      int    `json:"batch"`
	State          string `json:"state"`
	// ArrivalWindowMs is the arrival window (issuer.RoomConfig.ArrivalWindow)
	// in ms; 0: off.
	ArrivalWindowMs int64 `json:"arrival_window_ms"`
	// OpensAtMs and ClosesAtMs are the event window (Unix ms), absent when
	// unbounded. OpensAt and ClosesAt are the same as RFC 3339 strings,
	// deprecated, emitted for one release (docs/http-api.md#units).
	OpensAtMs  int64      `json:"opens_at_ms,omitempty"`
	ClosesAtMs int64      `json:"closes_at_ms,omitempty"`
	OpensAt    *time.Time `json:"opens_at,omitempty"`
	ClosesAt   *time.Time `json:"closes_at,omitempty"`
	// PreQueue is the pre-queue's order (issuer.RoomConfig.PreQueue): "fifo"
	// or "shuffle". PreQueueDeprecated is the same value under its old
	// name, emitted for one release (CHANGELOG.md#deprecated).
	PreQueue           string `json:"pre_queue"`
	PreQueueDeprecated string `json:"prequeue"`
	// PageTitle, PageMessage and BrandColor brand the waiting page; absent
	// when not set.
	PageTitle   string `json:"page_title,omitempty"`
	PageMessage string `json:"page_message,omitempty"`
	BrandColor  string `json:"brand_color,omitempty"`
	// PageLanguage is the page's default language (a BCP 47 tag),
	// PageLanguages the languages it may use (absent: every one),
	// PageDoneURL and PageDoneText the link of its sold-out and ended
	// pages; absent when not set (docs/browser.md#languages).
	PageLanguage  string   `json:"page_language,omitempty"`
	PageLanguages []string `json:"page_languages,omitempty"`
	PageDoneURL   string   `json:"page_done_url,omitempty"`
	PageDoneText  string   `json:"page_done_text,omitempty"`
	// PageLogo, PageFavicon and PageStylesheet name the page's assets
	// (files of FLASHGATE_PAGE_DIR/assets), PageImageOrigins the https
	// origins it may show images from; absent when not set.
	PageLogo         string   `json:"page_logo,omitempty"`
	PageFavicon      string   `json:"page_favicon,omitempty"`
	PageStylesheet   string   `json:"page_stylesheet,omitempty"`
	PageImageOrigins []string `json:"page_image_origins,omitempty"`
	// PageTemplate names the room's page template (FLASHGATE_PAGE_DIR/{name}.html).
	PageTemplate string `json:"page_template,omitempty"`
	// RetentionMs is how long the room's keys live after it ends
	// (issuer.RoomConfig.Retention) in ms; 0: the server's default
	// (FLASHGATE_ROOM_RETENTION).
	RetentionMs int64 `json:"retention_ms"`
	// Read only (docs/rooms.md#the-end-of-a-sale). CloseReason: why the room is
	// closed in effect, or why its last line ended (absent: never closed).
	// EndedAtMs: when it ended, Unix ms (absent while it has not, or since
	// it was reopened); its keys expire retention after it. DeletedAtMs:
	// when it was deleted, Unix ms. EndedAt and DeletedAt: the same as RFC
	// 3339 strings, deprecated, emitted for one release. Auto: created by
	// an enter under FLASHGATE_DEFAULT_ROOM.
	CloseReason string     `json:"close_reason,omitempty"`
	EndedAtMs   int64      `json:"ended_at_ms,omitempty"`
	DeletedAtMs int64      `json:"deleted_at_ms,omitempty"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	DeletedAt   *time.Time `json:"deleted_at,omitempty"`
	Auto        bool       `json:"auto,omitempty"`
}

func roomJSON(room string, c issuer.RoomConfig) RoomConfig {
	return RoomConfig{Room: room, Capacity: c.Capacity, RatePerMinute: c.RatePerMinute,
		SessionMs: c.SessionDuration.Milliseconds(), SessionSeconds: int64(c.SessionDuration / time.Second), TickMs: c.Tick.Milliseconds(),
		TickBatch: c.TickBatch, State: string(c.State), ArrivalWindowMs: max(0, c.ArrivalWindow.Milliseconds()),
		OpensAtMs: unixMs(c.Opens), ClosesAtMs: unixMs(c.Closes), OpensAt: utcOrNil(c.Opens), ClosesAt: utcOrNil(c.Closes),
		PreQueue:           string(c.WithDefaults().PreQueue),
		PreQueueDeprecated: string(c.WithDefaults().PreQueue),
		PageTitle:          c.PageTitle, PageMessage: c.PageMessage, BrandColor: c.BrandColor,
		PageLanguage: c.PageLanguage, PageLanguages: c.PageLanguages, PageDoneURL: c.PageDoneURL, PageDoneText: c.PageDoneText,
		PageLogo: c.PageLogo, PageFavicon: c.PageFavicon, PageStylesheet: c.PageStylesheet, PageImageOrigins: c.PageImageOrigins,
		PageTemplate: c.PageTemplate,
		RetentionMs:  c.Retention.Milliseconds(), CloseReason: c.CloseReason,
		EndedAtMs: unixMs(c.EndedAt), DeletedAtMs: unixMs(c.DeletedAt),
		EndedAt: utcOrNil(c.EndedAt), DeletedAt: utcOrNil(c.DeletedAt), Auto: c.Auto}
}

func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// roomPatch is the body of PUT /admin/rooms/:room; omitted members keep
// the current value (or the default, for a new room): issuer.RoomPatch in
// the API's units, merged and checked by issuer.UpdateRoom.
type roomPatch struct {
	Capacity      *int `json:"capacity"`
	RatePerMinute *int `json:"rate_per_minute"`
	// SessionMs sets how long an admission lasts, in ms (whole seconds,
	// 1,000 … 900,000); SessionSeconds, in seconds, is its deprecated old
	// name, accepted for one release (both given must agree).
	SessionMs      *int64  `json:"session_ms"`
	SessionSeconds *int64  `json:"session_seconds"`
	TickMs         *int64  `json:"tick_ms"`
	TickBatch      *int    `json:"batch"`
	State          *string `json:"state"`
	// ArrivalWindowMs sets the arrival window in ms; 0 turns it off.
	ArrivalWindowMs *int64 `json:"arrival_window_ms"`
	// OpensAtMs and ClosesAtMs set the event window, Unix ms; 0 removes a
	// bound. OpensAt and ClosesAt set it as an operator types it, RFC 3339
	// ("" removes a bound); both forms given must name the same instant.
	OpensAtMs  *int64  `json:"opens_at_ms"`
	ClosesAtMs *int64  `json:"closes_at_ms"`
	OpensAt    *string `json:"opens_at"`
	ClosesAt   *string `json:"closes_at"`
	// PreQueue sets the pre-queue's order: "fifo" or "shuffle".
	// PreQueueDeprecated is its old name, accepted for one release; both
	// given must agree.
	PreQueue           *string `json:"pre_queue"`
	PreQueueDeprecated *string `json:"prequeue"`
	// PageTitle, PageMessage and BrandColor brand the waiting page; "" clears one.
	PageTitle   *string `json:"page_title"`
	PageMessage *string `json:"page_message"`
	BrandColor  *string `json:"brand_color"`
	// PageLanguage, PageLanguages, PageDoneURL and PageDoneText set the
	// page's default language, its languages ([] : every one) and the link
	// of its final pages; "" clears one.
	PageLanguage  *string   `json:"page_language"`
	PageLanguages *[]string `json:"page_languages"`
	PageDoneURL   *string   `json:"page_done_url"`
	PageDoneText  *string   `json:"page_done_text"`
	// PageLogo, PageFavicon, PageStylesheet ("" the deployment's) and
	// PageImageOrigins ([] none) set the page's assets.
	PageLogo         *string   `json:"page_logo"`
	PageFavicon      *string   `json:"page_favicon"`
	PageStylesheet   *string   `json:"page_stylesheet"`
	PageImageOrigins *[]string `json:"page_image_origins"`
	// PageTemplate sets the room's page template ("" the deployment's).
	PageTemplate *string `json:"page_template"`
	// RetentionMs sets how long the room's keys live after it ends, in ms
	// (60,000 … 2,592,000,000); 0: the server's default.
	RetentionMs *int64 `json:"retention_ms"`
}

// GET /admin/rooms
func (s *Server) adminRooms(c *fiber.Ctx) error {
	rooms, err := s.is.Rooms(c.UserContext())
	if err != nil {
		return err
	}
	if rooms == nil {
		rooms = []string{}
	}
	return c.JSON(fiber.Map{"rooms": rooms})
}

// GET /admin/rooms/:room
func (s *Server) adminRoom(c *fiber.Ctx) error {
	room := param(c, "room")
	cfg, err := s.is.Room(c.UserContext(), room)
	if err != nil {
		return err
	}
	return c.JSON(roomJSON(room, cfg))
}

// PUT /admin/rooms/:room: create (201) or update (200) a room.
func (s *Server) adminPutRoom(c *fiber.Ctx) error {
	room := param(c, "room")
	var p roomPatch
	if len(c.Body()) == 0 {
		return problemFor(problem.MalformedJSON, "a JSON object with the room configuration is required")
	}
	if err := decodeJSON(c.Body(), &p); err != nil {
		return err
	}
	patch := issuer.RoomPatch{Capacity: p.Capacity, RatePerMinute: p.RatePerMinute, TickBatch: p.TickBatch,
		PageTitle: p.PageTitle, PageMessage: p.PageMessage, BrandColor: p.BrandColor,
		PageLanguage: p.PageLanguage, PageLanguages: p.PageLanguages, PageDoneURL: p.PageDoneURL, PageDoneText: p.PageDoneText,
		PageLogo: p.PageLogo, PageFavicon: p.PageFavicon, PageStylesheet: p.PageStylesheet, PageImageOrigins: p.PageImageOrigins,
		PageTemplate: p.PageTemplate}
	if p.SessionSeconds != nil {
		d := scaled(*p.SessionSeconds, time.Second)
		if p.SessionMs != nil && scaled(*p.SessionMs, time.Millisecond) != d {
			return problemFor(string(flashgate.CodeInvalidInput), "session_ms and session_seconds (its deprecated alias) differ")
		}
		patch.SessionDuration = &d
	}
	if p.SessionMs != nil {
		d := scaled(*p.SessionMs, time.Millisecond)
		patch.SessionDuration = &d
	}
	if p.TickMs != nil {
		d := scaled(*p.TickMs, time.Millisecond)
		patch.Tick = &d
	}
	if p.ArrivalWindowMs != nil {
		d := scaled(*p.ArrivalWindowMs, time.Millisecond)
		patch.ArrivalWindow = &d
	}
	if p.RetentionMs != nil {
		d := scaled(*p.RetentionMs, time.Millisecond)
		patch.Retention = &d
	}
	if p.State != nil {
		st := issuer.RoomState(*p.State)
		patch.State = &st
	}
	if p.PreQueueDeprecated != nil {
		if p.PreQueue != nil && *p.PreQueue != *p.PreQueueDeprecated {
			return problemFor(string(flashgate.CodeInvalidInput), "pre_queue and prequeue (its deprecated alias) differ")
		}
		p.PreQueue = p.PreQueueDeprecated
	}
	if p.PreQueue != nil {
		pq := issuer.PreQueue(*p.PreQueue)
		patch.PreQueue = &pq
	}
	for _, f := range []struct {
		name string
		ms   *int64
		rfc  *string
		dst  **time.Time
	}{{"opens_at", p.OpensAtMs, p.OpensAt, &patch.Opens}, {"closes_at", p.ClosesAtMs, p.ClosesAt, &patch.Closes}} {
		t, set, err := instantInput(f.name, f.ms, f.rfc) // zero: no bound
		if err != nil {
			return err
		}
		if set {
			*f.dst = &t
		}
	}
	cfg, created, err := s.is.UpdateRoom(c.UserContext(), room, patch)
	if err != nil {
		return err
	}
	if created {
		c.Status(fiber.StatusCreated)
	}
	return c.JSON(roomJSON(room, cfg))
}

// instantInput reads an instant of a request given as Unix ms (member
// name+"_ms") or as an operator types it, RFC 3339 (member name):
// docs/http-api.md#units. set: either member was given; t is then the
// instant, or the zero time for 0 or "" (none). Errors (400
// invalid_input): a negative ms, a string that is not RFC 3339, or both
// members given for different instants.
func instantInput(name string, ms *int64, rfc *string) (t time.Time, set bool, err error) {
	if ms != nil {
		if *ms < 0 {
			return t, true, problemFor(string(flashgate.CodeInvalidInput), name+"_ms must be a Unix time in ms, or 0 for none")
		}
		if *ms > 0 {
			t = time.UnixMilli(*ms)
		}
	}
	if rfc != nil {
		var r time.Time
		if *rfc != "" {
			if r, err = time.Parse(time.RFC3339, *rfc); err != nil {
				return t, true, problemFor(string(flashgate.CodeInvalidInput), name+` must be an RFC 3339 time ("2026-11-27T09:00:00Z") or "" for none`)
			}
		}
		if ms != nil && !r.Equal(t) {
			return t, true, problemFor(string(flashgate.CodeInvalidInput), name+"_ms and "+name+" (RFC 3339) name different instants: give one")
		}
		t = r
	}
	return t, ms != nil || rfc != nil, nil
}

// scaled is n units as a time.Duration, saturating instead of overflowing,
// so that an absurd JSON number reaches the room's bounds as out of range.
func scaled(n int64, unit time.Duration) time.Duration {
	switch {
	case n > math.MaxInt64/int64(unit):
		return math.MaxInt64
	case n < math.MinInt64/int64(unit):
		return math.MinInt64
	}
	return time.Duration(n) * unit
}

// closeRequest is the optional body of POST /admin/rooms/:room/close.
type closeRequest struct {
	// Reason: sold_out, closed (the default) or event_ended.
	Reason string `json:"reason"`
}

// POST /admin/rooms/:room/close: closes the room (issuer.Close) with the
// body's reason, if any.
func (s *Server) adminClose(c *fiber.Ctx) error {
	var req closeRequest
	if len(c.Body()) > 0 {
		if err := decodeJSON(c.Body(), &req); err != nil {
			return err
		}
	}
	room := param(c, "room")
	cfg, err := s.is.Close(c.UserContext(), room, req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(roomJSON(room, cfg))
}

// POST /admin/rooms/:room/sold-out: closes the room with reason sold_out.
func (s *Server) adminSoldOut(c *fiber.Ctx) error {
	room := param(c, "room")
	cfg, err := s.is.SoldOut(c.UserContext(), room)
	if err != nil {
		return err
	}
	return c.JSON(roomJSON(room, cfg))
}

// DELETE /admin/rooms/:room: deletes the room (issuer.DeleteRoom) and
// answers its config as deleted (deleted_at, close_reason, ended_at).
func (s *Server) adminDeleteRoom(c *fiber.Ctx) error {
	room := param(c, "room")
	cfg, err := s.is.DeleteRoom(c.UserContext(), room)
	if err != nil {
		return err
	}
	return c.JSON(roomJSON(room, cfg))
}

// POST /admin/rooms/:room/open|pause
func (s *Server) adminState(st issuer.RoomState) fiber.Handler {
	return func(c *fiber.Ctx) error {
		room := param(c, "room")
		cfg, err := s.is.SetState(c.UserContext(), room, st)
		if err != nil {
			return err
		}
		return c.JSON(roomJSON(room, cfg))
	}
}

type revokeRequest struct {
	AdmissionID string `json:"admission_id"`
	User        string `json:"user"`
	// BanMs bans the user for this long with the revocation (issuer.RevokeOptions):
	// absent for the room's session duration, 0 for no ban.
	BanMs  *int64 `json:"ban_ms"`
	Reason string `json:"reason"`
}

// RevokeResponse is the answer of POST /admin/rooms/:room/revoke.
type RevokeResponse struct {
	State       string `json:"state"`
	AdmissionID string `json:"admission_id"`
	RevokedAtMs int64  `json:"revoked_at_ms"`
	Repeated    bool   `json:"repeated"`
	// BannedUntilMs is the end of the ban that came with the revocation (absent: none).
	BannedUntilMs int64 `json:"banned_until_ms,omitempty"`
}

// POST /admin/rooms/:room/revoke
func (s *Server) adminRevoke(c *fiber.Ctx) error {
	var req revokeRequest
	if len(c.Body()) == 0 {
		return problemFor(problem.MalformedJSON, `a JSON object {"admission_id":…} or {"user":…} is required`)
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	o := issuer.RevokeOptions{Reason: req.Reason}
	if req.BanMs != nil {
		d := scaled(*req.BanMs, time.Millisecond)
		o.Ban = &d
	}
	r, err := s.is.RevokeWith(c.UserContext(), param(c, "room"), req.User, req.AdmissionID, o)
	if err != nil {
		return err
	}
	return c.JSON(RevokeResponse{State: string(flashgate.StateRevoked), AdmissionID: r.AdmissionID,
		RevokedAtMs: r.RevokedAt.UnixMilli(), Repeated: r.Repeated, BannedUntilMs: unixMs(r.BannedUntil)})
}

type banRequest struct {
	User       string `json:"user"`
	DurationMs *int64 `json:"duration_ms"`
	Reason     string `json:"reason"`
}

// BanJSON is a ban as the admin API shows it.
type BanJSON struct {
	User          string `json:"user"`
	BannedUntilMs int64  `json:"banned_until_ms"`
	BannedAtMs    int64  `json:"banned_at_ms,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// BanResponse is the answer of POST /admin/rooms/:room/ban: the ban, and
// what it ended.
type BanResponse struct {
	BanJSON
	// RemovedWaiting: the user's waiting entry was removed (its token now reads REVOKED).
	RemovedWaiting bool `json:"removed_waiting"`
	// RevokedAdmissionID: the live admission the ban revoked, if any.
	RevokedAdmissionID string `json:"revoked_admission_id,omitempty"`
}

// POST /admin/rooms/:room/ban
func (s *Server) adminBan(c *fiber.Ctx) error {
	var req banRequest
	if len(c.Body()) == 0 {
		return problemFor(problem.MalformedJSON, `a JSON object {"user":…,"duration_ms":…} is required`)
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.User == "" {
		return problemFor(string(flashgate.CodeInvalidInput), "user is required")
	}
	if req.DurationMs == nil {
		return problemFor(string(flashgate.CodeInvalidInput), "duration_ms is required (1 … 2592000000, 30 days)")
	}
	b, err := s.is.Ban(c.UserContext(), param(c, "room"), req.User, scaled(*req.DurationMs, time.Millisecond), req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(BanResponse{BanJSON: banJSON(*b), RemovedWaiting: b.RemovedWaiting,
		RevokedAdmissionID: b.RevokedAdmission})
}

func banJSON(b issuer.Ban) BanJSON {
	return BanJSON{User: b.User, BannedUntilMs: b.Until.UnixMilli(), BannedAtMs: unixMs(b.BannedAt), Reason: b.Reason}
}

// DELETE /admin/rooms/:room/ban/:user
func (s *Server) adminUnban(c *fiber.Ctx) error {
	if err := s.is.Unban(c.UserContext(), param(c, "room"), param(c, "user")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// BansResponse is the answer of GET /admin/rooms/:room/bans.
type BansResponse struct {
	Bans []BanJSON `json:"bans"`
	// Total is the number of bans in effect in the room.
	Total int64 `json:"total"`
	// NextCursor is the cursor of the next page; absent after the last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

// GET /admin/rooms/:room/bans?limit=N&cursor=C
func (s *Server) adminBans(c *fiber.Ctx) error {
	limit := 100
	if q := query(c, "limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > issuer.MaxBansPage {
			return problemFor(string(flashgate.CodeInvalidInput), "limit must be an integer 1 … "+strconv.Itoa(issuer.MaxBansPage))
		}
		limit = n
	}
	p, err := s.is.Bans(c.UserContext(), param(c, "room"), query(c, "cursor"), limit)
	if err != nil {
		return err
	}
	out := BansResponse{Bans: make([]BanJSON, 0, len(p.Bans)), Total: p.Total, NextCursor: p.Next}
	for _, b := range p.Bans {
		out.Bans = append(out.Bans, banJSON(b))
	}
	return c.JSON(out)
}

// Stats is the admin API's JSON form of issuer.Stats.
type Stats struct {
	Room   string     `json:"room"`
	Config RoomConfig `json:"config"`
	// State is the state in effect: config.state with the event window applied.
	State      string `json:"state"`
	Waiting    int64  `json:"waiting"`
	Active     int64  `json:"live"`
	Entered    int64  `json:"entered"`
	Admitted   int64  `json:"admitted"`
	FastTrack  int64  `json:"fast_track"`
	Expired    int64  `json:"expired"`
	NotClaimed int64  `json:"not_claimed"`
	Completed  int64  `json:"completed"`
	Revoked    int64  `json:"revoked"`
	Left       int64  `json:"left"`
	Zombies    int64  `json:"zombies_cleaned"`
	Banned     int64  `json:"banned"`
	Removed    int64  `json:"removed"`
	// ClosedOut counts the waiting entries a closed line's drain removed
	// (they read CLOSED); ClosedSeq is the arrival counter when the room
	// last closed (0: never).
	ClosedOut int64 `json:"closed_out"`
	ClosedSeq int64 `json:"closed_seq"`
	// Priority is how many of Waiting wait in the priority lane;
	// PriorityAdmitted the admissions from it (part of admitted), Bypassed
	// the bypass invites admitted at once (part of admitted), InvitesUsed
	// the invites that took a place.
	Priority         int64 `json:"priority_waiting"`
	PriorityAdmitted int64 `json:"priority_admitted"`
	Bypassed         int64 `json:"bypassed"`
	InvitesUsed      int64 `json:"invites_used"`
	PeakActive       int64 `json:"peak_active"`
	// Lottery is the pre-queue lottery (issuer.Stats.Lottery); absent when
	// the room has none.
	Lottery *LotteryJSON `json:"lottery,omitempty"`
	AtMs    int64        `json:"at_ms"`
}

// LotteryJSON is issuer.Lottery as the admin API shows it: before the draw
// only the commitment; once drawn the seed, cutoff and bits that reproduce
// the order (docs/rooms.md#pre-queue-lottery).
type LotteryJSON struct {
	Drawn      bool   `json:"drawn"`
	Commitment string `json:"commitment"`
	Seed       string `json:"seed,omitempty"`
	// Epoch is the room's epoch, part of the lottery's input (and the
	// first part of every admission id); present once drawn.
	Epoch      string `json:"epoch,omitempty"`
	Cutoff     *int64 `json:"cutoff,omitempty"`
	Bits       int    `json:"bits,omitempty"`
	DrawnAtMs  int64  `json:"drawn_at_ms,omitempty"`
	PlacedAtMs int64  `json:"placed_at_ms,omitempty"`
	Placed     int64  `json:"placed"`
}

func lotteryJSON(l *issuer.Lottery, epoch string) *LotteryJSON {
	if l == nil {
		return nil
	}
	out := &LotteryJSON{Drawn: l.Drawn, Commitment: l.Commitment, Placed: l.Placed}
	if l.Drawn {
		cutoff := l.Cutoff
		out.Seed, out.Epoch, out.Cutoff, out.Bits = l.Seed, epoch, &cutoff, l.Bits
		out.DrawnAtMs, out.PlacedAtMs = unixMs(l.DrawnAt), unixMs(l.PlacedAt)
	}
	return out
}

// GET /admin/rooms/:room/stats
func (s *Server) adminStats(c *fiber.Ctx) error {
	st, err := s.is.Stats(c.UserContext(), param(c, "room"))
	if err != nil {
		return err
	}
	cfg := roomJSON("", st.Config)
	return c.JSON(Stats{Room: st.Room, Config: cfg, State: string(st.State), Waiting: st.Waiting, Active: st.Active,
		Entered: st.Entered, Admitted: st.Admitted, FastTrack: st.FastTrack, Expired: st.Expired, NotClaimed: st.NotClaimed,
		Completed: st.Completed, Revoked: st.Revoked, Left: st.Left, Zombies: st.Zombies,
		Banned: st.Banned, Removed: st.Removed, ClosedOut: st.ClosedOut, ClosedSeq: st.ClosedSeq,
		Priority: st.Priority, PriorityAdmitted: st.PriorityAdmitted, Bypassed: st.Bypassed, InvitesUsed: st.InvitesUsed,
		PeakActive: st.PeakActive, Lottery: lotteryJSON(st.Lottery, st.Epoch), AtMs: st.At.UnixMilli()})
}

type invitesRequest struct {
	Lane  string `json:"lane"`
	User  string `json:"user"`
	TTLMs *int64 `json:"ttl_ms"`
	// ExpiresAtMs (Unix ms) or ExpiresAt (RFC 3339, as an operator types
	// it): when the invites expire, instead of TTLMs.
	ExpiresAtMs *int64  `json:"expires_at_ms"`
	ExpiresAt   *string `json:"expires_at"`
	// Reusable: each invite admits any number of holders until it expires;
	// the default is single use.
	Reusable bool `json:"reusable"`
	// SingleUse is the former switch (single use is now the default): true
	// is accepted, false refused (it no longer means "reusable").
	SingleUse *bool `json:"single_use"`
	Count     int   `json:"count"`
}

// InviteJSON is a signed invite as the admin API returns it.
type InviteJSON struct {
	Token       string `json:"token"`
	ID          string `json:"id"`
	Room        string `json:"room"`
	Lane        string `json:"lane"`
	User        string `json:"user,omitempty"`
	SingleUse   bool   `json:"single_use"`
	IssuedAtMs  int64  `json:"issued_at_ms"`
	ExpiresAtMs int64  `json:"expires_at_ms"`
}

// InvitesResponse is the answer of POST /admin/rooms/:room/invites.
type InvitesResponse struct {
	Invites []InviteJSON `json:"invites"`
}

// POST /admin/rooms/:room/invites: sign invites (issuer.Invites). The
// room need not exist yet; nothing is stored until an invite is used.
func (s *Server) adminInvites(c *fiber.Ctx) error {
	var req invitesRequest
	if len(c.Body()) > 0 {
		if err := decodeJSON(c.Body(), &req); err != nil {
			return err
		}
	}
	if req.SingleUse != nil && (!*req.SingleUse || req.Reusable) {
		return problemFor(string(flashgate.CodeInvalidInput),
			`invites are single use by default; "reusable": true signs reusable ones ("single_use" is no longer needed)`)
	}
	o := issuer.InviteOptions{Lane: req.Lane, User: req.User, Reusable: req.Reusable, Count: req.Count}
	if req.ExpiresAt != nil && *req.ExpiresAt == "" {
		req.ExpiresAt = nil // "": not given, as it always was
	}
	exp, expSet, err := instantInput("expires_at", req.ExpiresAtMs, req.ExpiresAt)
	if err != nil {
		return err
	}
	if req.TTLMs != nil && expSet {
		return problemFor(string(flashgate.CodeInvalidInput), "give ttl_ms or expires_at_ms (or expires_at), not both")
	}
	if req.TTLMs != nil {
		if *req.TTLMs <= 0 {
			return problemFor(string(flashgate.CodeInvalidInput), "ttl_ms must be positive")
		}
		o.TTL = scaled(*req.TTLMs, time.Millisecond)
	}
	if expSet && exp.IsZero() {
		return problemFor(string(flashgate.CodeInvalidInput), "expires_at_ms must be a positive Unix time in ms (or leave it out for the default lifetime)")
	}
	o.ExpiresAt = exp
	if req.Count < 0 {
		return problemFor(string(flashgate.CodeInvalidInput), "count must be 1 … "+strconv.Itoa(issuer.MaxInvites))
	}
	invs, err := s.is.Invites(param(c, "room"), o)
	if err != nil {
		return err
	}
	out := InvitesResponse{Invites: make([]InviteJSON, 0, len(invs))}
	for _, v := range invs {
		out.Invites = append(out.Invites, InviteJSON{Token: v.Token, ID: v.ID, Room: v.Room, Lane: v.Lane, User: v.User,
			SingleUse: v.SingleUse, IssuedAtMs: v.IssuedAt.UnixMilli(), ExpiresAtMs: v.ExpiresAt.UnixMilli()})
	}
	return c.JSON(out)
}
