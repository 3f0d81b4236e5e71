package server

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

// The waiting-room page (GET /wait/{room}): server-rendered from
// page/wait.html (or Options.PageDir's wait.html), kept live by
// page/wait.js over the browser client, styled by page/wait.css. No build
// step, no framework, no inline script or style (the CSP forbids them).

//go:embed page/wait.html page/wait.js page/wait.css
var pageFS embed.FS

// PageTemplate is the file name of the waiting page's template, in the
// embedded assets and in Options.PageDir.
const PageTemplate = "wait.html"

// Asset paths of the waiting page.
const (
	pageScriptPath = "/wait/assets/wait.js"
	pageStylePath  = "/wait/assets/wait.css"
	clientPath     = "/flashgate-client.js"
)

var (
	pageScript = newAsset(mustRead("page/wait.js"), jsType)
	pageStyle  = newAsset(mustRead("page/wait.css"), "text/css; charset=utf-8")
	// builtinPage is the embedded template, parsed once.
	builtinPage = template.Must(template.New(PageTemplate).Parse(string(mustRead("page/" + PageTemplate))))
)

func mustRead(name string) []byte {
	b, err := pageFS.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return b
}

// Page states (PageView.State; the page's data-state, which wait.css and
// wait.js key on).
const (
	pageWaiting      = "waiting"      // in line, room open
	pagePaused       = "paused"       // in line, nobody admitted for now
	pageOpens        = "opens"        // in line before the event window opens (OpensAtMs)
	pageActive       = "active"       // admitted: continue
	pageClosed       = "closed"       // sold out / closed
	pageEnded        = "ended"        // the admission lapsed, was used or revoked
	pageUnknown      = "unknown"      // no such room
	pageReconnecting = "reconnecting" // the queue is unavailable for a moment: the place is kept
	pageError        = "error"        // anything else
	pageChecking     = "checking"     // the proof of work before the first enter (wait.js solves it, then enters)
	pageInvited      = "invited"      // an invite link opened: confirm to use it (nothing entered yet)
)

// PageView is what the waiting page's template gets (an Options.PageDir
// template included). Keep the element ids and data- attributes of the
// built-in page/wait.html for wait.js to drive it.
type PageView struct {
	// Room is the room id of the request's path, for the data- attributes
	// and form targets: it may name no room (any text a link holds). Name is
	// what the page shows as the room's name: Room once the room is known to
	// exist, else "" (the page never echoes a path as a title).
	Room, Name string
	State      string // waiting, paused, opens, active, closed, ended, unknown, reconnecting, error, checking, invited
	// Heading and Message describe the state in words.
	Heading, Message string
	// HasPlace: Position, Ahead, TotalWaiting and Wait are set (WAITING).
	HasPlace bool
	// PreQueue: WAITING in a shuffle room's pre-queue, the place not drawn
	// yet (issuer.Entry.PreQueue): no Position or Ahead, TotalWaiting set.
	PreQueue                      bool
	Position, Ahead, TotalWaiting int64
	// Wait is the estimated wait in words ("about 3 minutes"); "" unknown.
	Wait string
	// PollMs is the issuer's poll hint; Refresh the meta refresh in
	// seconds (0: none).
	PollMs  int64
	Refresh int
	// OpensAtMs and OpensAt: when the event window opens (state opens).
	OpensAtMs int64
	OpensAt   string
	// WaitingToken is the shopper's own waiting token (the page is no-store).
	WaitingToken string
	// Return is the validated return URL (Server.ReturnURL), "" when none.
	Return string
	// Code is the problem code of an error state.
	Code string
	// Script, Style and Client are the asset paths; ContinueAction the
	// form's target (POST /wait/{room}/continue).
	Script, Style, Client, ContinueAction string
	// Invite is the invite token of an invite link (state invited), and
	// InviteAction the target of the form that uses it (POST /wait/{room}):
	// opening the link enters nobody, so a link scanner or a prefetch does
	// not use the invite up; the visitor's button does.
	Invite, InviteAction string
	// The room's branding (issuer.RoomConfig, the admin API): RoomTitle
	// (page_title, "" for none), RoomMessage (page_message, one item a
	// line, nil for none) and BrandStyle, the path of the room's
	// stylesheet (GET /wait/{room}/brand.css) when it has a brand_color,
	// else "".
	RoomTitle   string
	RoomMessage []string
	BrandStyle  string
	// LotteryCommitment (PreQueue only) is the room's lottery commitment,
	// and ReceiptHref a data: URL of the JSON file of the entry's join
	// receipt ({"receipt", "room", "arrival", "lottery_commitment",
	// "room_view"}) for a download link; "" without one (docs/rooms.md "Pre-queue
	// lottery").
	LotteryCommitment string
	ReceiptHref       template.URL
	// LotteryNote (PreQueue only) tells the buyer in plain words to keep
	// the receipt, what it proves, and whether anyone could know the order
	// in advance (a drand beacon, or an operator-chosen seed; issue 36).
	LotteryNote string
}

// lotteryNote is PageView.LotteryNote for an entry whose room's draw uses
// randomness (issuer.Entry.LotteryRandomness).
func lotteryNote(randomness string) string {
	const keep = "Keep your receipt: it proves you entered the draw with your arrival number before the order existed, and lets anyone check your place afterwards."
	if randomness == issuer.OperatorChosen || randomness == "" {
		return keep + " This room's seed is operator-chosen (no public beacon): whoever runs the waiting room could know the order in advance."
	}
	return keep + " The order also depends on a public drand beacon round published after the opening: nobody, the operator included, could know it in advance."
}

// receiptHref is the data: URL of e's join receipt as a JSON file ("" when
// e has none). Its parts are a compact JWS, a room id, a number and hex:
// nothing a data: URL could carry but this JSON.
func receiptHref(e *issuer.Entry) template.URL {
	if e.Receipt == "" {
		return ""
	}
	doc, _ := json.Marshal(map[string]any{"receipt": e.Receipt, "room": e.Room, "arrival": e.Arrival,
		"lottery_commitment": e.LotteryCommitment, "room_view": "/v1/rooms/" + url.PathEscape(e.Room)})
	return template.URL("data:application/json;charset=utf-8," + url.PathEscape(string(doc))) //nolint:gosec // built here from checked parts, escaped
}

// loadPage returns the page template: Options.PageDir's wait.html if set
// (parsed and tried on a sample view, so that a broken template fails
// startup), else the built-in one.
func loadPage(dir string) (*template.Template, error) {
	if dir == "" {
		return builtinPage, nil
	}
	name := filepath.Join(dir, PageTemplate)
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("server: Options.PageDir: %w", err)
	}
	t, err := template.New(PageTemplate).Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("server: Options.PageDir: %s does not parse: %w", name, err)
	}
	sample := PageView{Room: "sample", State: pageWaiting, HasPlace: true, Position: 3, Ahead: 2, TotalWaiting: 9,
		PollMs: 2000, Refresh: 2, Script: pageScriptPath, Style: pageStylePath, Client: clientPath}
	if err := t.Execute(&bytes.Buffer{}, sample); err != nil {
		return nil, fmt.Errorf("server: Options.PageDir: %s fails on a sample page: %w", name, err)
	}
	return t, nil
}

// pageGuard renders whatever error the page's chain returns (a rate limit,
// the issuer's refusal) as the page, never as a problem document.
func (s *Server) pageGuard(c *fiber.Ctx) error {
	err := c.Next()
	if err == nil {
		return nil
	}
	v := s.pageBase(c)
	return s.renderPage(c, v.problem(s, c, toProblem(err)))
}

// pageBase is the view every page starts from.
func (s *Server) pageBase(c *fiber.Ctx) *PageView {
	room := param(c, "room")
	v := &PageView{Room: room, Script: pageScriptPath, Style: pageStylePath, Client: clientPath,
		ContinueAction: "/wait/" + url.PathEscape(room) + "/continue", InviteAction: "/wait/" + url.PathEscape(room)}
	v.Return, _ = s.ReturnURL(query(c, "return"))
	if v.Return == "" {
		v.Return, _ = s.ReturnURL(strings.Clone(c.FormValue("return")))
	}
	return v
}

// problem turns v into the page of a refusal: the status, and Retry-After
// for the retryable ones.
func (v *PageView) problem(s *Server, c *fiber.Ctx, p *Problem) *PageView {
	s.m.storeError(p.Code)
	if logged(p) {
		s.log.Log(c.UserContext(), logLevel(p.Status), "waiting page: request failed", "room", clipLog(v.Room),
			"status", p.Status, "err", logErr(p))
	}
	c.Status(p.Status)
	v.Code = p.Code
	switch p.Code { // refusals a room's own script answered: the room exists
	case string(flashgate.CodeRoomClosed), string(flashgate.CodeNotAdmitted), string(flashgate.CodeBanned),
		string(flashgate.CodeInviteExpired), string(flashgate.CodeInviteUsed):
		v.Name = v.Room
	}
	switch p.Code {
	case string(flashgate.CodeRoomClosed):
		v.State, v.Heading, v.Message = pageClosed, "Sold out", "This sale is closed: it is sold out or has ended."
		// The room's close reason picks the words, as for a CLOSED entry; a
		// failed read keeps the generic ones.
		if cfg, err := s.is.Room(c.UserContext(), v.Room); err == nil && cfg.CloseReason != "" {
			v.Heading, v.Message = closedText(cfg.CloseReason)
		}
	case string(flashgate.CodeRoomLimit):
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(p.kind.RetryAfter))
		v.State, v.Heading, v.Message = pageUnknown, "No such waiting room", "There is no such waiting room, and none can be opened now. Check the link you followed."
	case string(flashgate.CodeUnknownRoom), string(flashgate.CodeInvalidInput):
		v.State, v.Heading, v.Message = pageUnknown, "No such waiting room", "There is no such waiting room. Check the link you followed."
	case string(flashgate.CodeUnavailable), string(flashgate.CodeStoreFull), problem.RateLimited:
		secs := max(1, p.kind.RetryAfter)
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
		v.State, v.Heading, v.Message = pageReconnecting, "Reconnecting…", "The waiting room is busy for a moment. Your place in line is kept; this page retries by itself."
		v.Refresh = secs
	case string(flashgate.CodeNotAdmitted):
		v.State, v.Heading, v.Message = pageWaiting, "You are in line", "It is not your turn yet."
		v.Refresh = 2
	case string(flashgate.CodeInviteInvalid), string(flashgate.CodeInviteScope), string(flashgate.CodeInviteExpired),
		string(flashgate.CodeInviteUsed):
		v.State, v.Heading = pageEnded, "This invitation cannot be used"
		v.Message = map[string]string{
			string(flashgate.CodeInviteInvalid): "The invitation link is not valid. Check that you copied all of it.",
			string(flashgate.CodeInviteScope):   "This invitation is for another sale or another account.",
			string(flashgate.CodeInviteExpired): "This invitation has expired.",
			string(flashgate.CodeInviteUsed):    "This invitation has already been used.",
		}[p.Code] + " Open the sale's link without it to line up with everyone."
	case string(flashgate.CodeBanned):
		v.State, v.Heading, v.Message = pageEnded, "You cannot line up now", "You were removed from this waiting room."
		if p.BannedUntilMs > 0 {
			v.Message = "You were removed from this waiting room until " +
				time.UnixMilli(p.BannedUntilMs).UTC().Format("Mon 2 Jan 15:04 MST") + "."
		}
	default:
		v.State, v.Heading, v.Message = pageError, "Something went wrong", "The waiting room could not answer ("+p.Code+"). Reload the page to try again."
	}
	if v.State == pageUnknown { // final (wait.js follows nothing): no trace of the path's text
		v.Room, v.ContinueAction, v.InviteAction = "", "", ""
	}
	return v
}

// GET /wait/:room: the waiting page. It enters the visitor (enter is
// idempotent: a reload keeps the place) and renders the answer; a visitor
// that still owes the proof of work (Options.EnterPoW) gets the page in
// state "checking" instead, and wait.js solves it and enters. With
// ?invite= it enters nobody and renders the invite's confirmation (state
// invited): GET and HEAD are what link scanners, chat unfurlers and
// prefetch send, so only the page's POST (pageInvite) uses an invite.
func (s *Server) page(c *fiber.Ctx) error {
	v := s.pageBase(c)
	if inv := query(c, "invite"); inv != "" {
		if !issuer.ValidID(v.Room) { // no room by that name can exist: the unknown page
			return problemFor(string(flashgate.CodeInvalidInput), "malformed room id")
		}
		return s.renderPage(c, s.invited(c, v, inv))
	}
	u, err := s.user(c)
	if err != nil {
		return err
	}
	if !s.powPassed(c, u) {
		// The first enter needs a proof of work: wait.js solves it and enters.
		v.State, v.Heading = pageChecking, "Checking your browser…"
		v.Message = "This takes a second or two, then you join the line. Keep this page open."
		return s.renderPage(c, v)
	}
	e, err := s.is.Enter(c.UserContext(), v.Room, u)
	if err != nil {
		return s.bannedProblem(err)
	}
	v.Name = v.Room
	v.entry(e)
	// The room's config: its branding, and the event window. A failed read
	// only costs the branding (and the countdown): the entry stands.
	cfg, err := s.is.Room(c.UserContext(), v.Room)
	if err == nil {
		v.brand(cfg)
	}
	if v.State == pagePaused {
		// The event window: paused before it opens (the entry carries the
		// opening time while it is ahead; an answer from a snapshot too).
		opens := e.OpensAt
		if opens.IsZero() && err == nil && cfg.Opens.After(s.now()) {
			opens = cfg.Opens
		}
		if !opens.IsZero() {
			v.State, v.Heading = pageOpens, "Opens soon"
			v.OpensAtMs = opens.UnixMilli()
			v.OpensAt = opens.UTC().Format("Mon 2 Jan 15:04 MST")
			v.Message = "The sale opens at " + v.OpensAt + ". Keep this page open: your place in line is saved."
			if v.PreQueue {
				v.Message = "The sale opens at " + v.OpensAt + ". " + preQueueMessage
			}
		}
	}
	return s.renderPage(c, v)
}

// invited fills v as an invite link's confirmation page: a form that posts
// the invite (pageInvite). The room's name and branding show when it exists
// (an auto room may not yet: the POST creates it).
func (s *Server) invited(c *fiber.Ctx, v *PageView, invite string) *PageView {
	v.State, v.Invite = pageInvited, invite
	v.Heading = "You’re invited"
	v.Message = "This invitation takes you ahead of the public line. It is used when you press the button: press it where you will wait."
	if cfg, err := s.is.Room(c.UserContext(), v.Room); err == nil {
		v.Name = v.Room
		v.brand(cfg)
	}
	return v
}

// POST /wait/:room: the invite confirmation's button. Enters the visitor
// with the form's invite (issuer.EnterWithInvite: a repeated post answers
// the same entry) and sends the browser (303) to the waiting page without
// the invite, the return URL kept: the page's enter answers the entry the
// invite gave. Refusals render as the page (invite_used, …).
func (s *Server) pageInvite(c *fiber.Ctx) error {
	v := s.pageBase(c)
	u, err := s.user(c)
	if err != nil {
		return err
	}
	inv := strings.Clone(c.FormValue("invite"))
	if inv == "" {
		return problemFor(string(flashgate.CodeInviteInvalid), "the form carries no invite")
	}
	if _, err := s.is.EnterWithInvite(c.UserContext(), v.Room, u, inv); err != nil {
		return s.bannedProblem(err)
	}
	to := v.InviteAction
	if v.Return != "" {
		to += "?return=" + url.QueryEscape(v.Return)
	}
	pageHeaders(c, v.Return)
	return c.Redirect(to, fiber.StatusSeeOther)
}

// brand fills v's branding from the room's config.
func (v *PageView) brand(cfg issuer.RoomConfig) {
	v.RoomTitle = cfg.PageTitle
	if cfg.PageMessage != "" {
		v.RoomMessage = strings.Split(cfg.PageMessage, "\n")
	}
	if cfg.BrandColor != "" {
		// The colour in the query: a new colour is a new URL, so the
		// stylesheet may be cached.
		v.BrandStyle = "/wait/" + url.PathEscape(v.Room) + "/brand.css?v=" + strings.ToLower(cfg.BrandColor[1:])
	}
}

// GET /wait/:room/brand.css: the room's brand colour as the page's
// stylesheet. The page's CSP (style-src 'self') forbids inline styles, so
// the colour cannot be set in the page itself: this stylesheet, served from
// the page's own origin, overrides wait.css's custom properties --accent and
// --on-accent (black or white, whichever contrasts more with the accent: at
// least 4.58:1, WCAG AA for the button's text). A room without a colour
// gets an empty stylesheet (the built-in colours).
func (s *Server) brandStyle(c *fiber.Ctx) error {
	room := param(c, "room")
	cfg, err := s.is.Room(c.UserContext(), room)
	if err != nil {
		return err
	}
	body := "/* " + room + ": the built-in colours */\n"
	if issuer.ValidColor(cfg.BrandColor) {
		col := strings.ToLower(cfg.BrandColor)
		body = ":root{--accent:" + col + ";--on-accent:" + onAccent(col) + "}\n"
	}
	c.Set(fiber.HeaderCacheControl, assetMaxAge)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderContentType, "text/css; charset=utf-8")
	return c.SendString(body)
}

// onAccent is the text colour for the accent col ("#rrggbb"): black or
// white, whichever has the higher WCAG contrast ratio with it. The worse of
// the two best cases is 4.58:1 (with pure black; a softer near-black would
// drop below 4.5:1 around mid-grey accents).
func onAccent(col string) string {
	ch := func(i int) float64 {
		n, _ := strconv.ParseUint(col[i:i+2], 16, 8)
		v := float64(n) / 255
		if v <= 0.04045 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	l := 0.2126*ch(1) + 0.7152*ch(3) + 0.0722*ch(5)
	if (l+0.05)/0.05 >= 1.05/(l+0.05) { // contrast with black ≥ with white
		return "#000"
	}
	return "#fff"
}

// entry fills v from the visitor's entry.
func (v *PageView) entry(e *issuer.Entry) {
	v.WaitingToken = e.WaitingToken
	switch e.State {
	case flashgate.StateWaiting:
		v.HasPlace, v.Position, v.Ahead, v.TotalWaiting = !e.PreQueue, e.Position, e.Ahead, e.TotalWaiting
		v.PreQueue = e.PreQueue
		v.LotteryCommitment, v.ReceiptHref = e.LotteryCommitment, receiptHref(e)
		if e.LotteryCommitment != "" {
			v.LotteryNote = lotteryNote(e.LotteryRandomness)
		}
		v.PollMs = e.PollAfter.Milliseconds()
		v.Refresh = int(max(1, (e.PollAfter+time.Second-1)/time.Second))
		v.Wait = waitWords(e.EstimatedWait)
		switch e.RoomState {
		case issuer.RoomClosed:
			v.State, v.Heading, v.Message = pageClosed, "Sold out", "This sale is closed: it is sold out or has ended."
			v.Refresh = 0
		case issuer.RoomPaused:
			v.State, v.Heading, v.Message = pagePaused, "Paused", "The waiting room is paused. Keep this page open: your place in line is saved."
		default:
			v.State, v.Heading, v.Message = pageWaiting, "You are in line", "Keep this page open: it updates by itself, and takes you on when it is your turn."
			if e.Lane == flashgate.LanePriority { // wait.js's "priority" text
				v.Heading = "You are in the priority line"
				v.Message = "You were invited: the priority line goes first. Keep this page open: it takes you on when it is your turn."
			}
		}
		if e.PreQueue && v.State != pageClosed {
			v.Message = preQueueMessage
		}
	case flashgate.StateActive:
		v.State, v.Heading, v.Message = pageActive, "It’s your turn", "Continue now: your turn is held for a limited time."
	case flashgate.StateClosed:
		v.State = pageClosed
		v.Heading, v.Message = closedText(e.Reason)
	default:
		v.State, v.Heading, v.Message = pageEnded, "Your turn has ended", "Your turn was used or has lapsed. Reload the page to line up again."
	}
}

// preQueueMessage is the page's message in a shuffle room's pre-queue
// (wait.js has the same words).
const preQueueMessage = "You’re in the pre-queue: places are drawn at random when the sale opens, " +
	"so everyone here has the same chance. Keep this page open: your place appears once it is drawn."

// closedText is the heading and message of a CLOSED entry, by its reason:
// "Sold out" for sold_out, "This sale has ended" otherwise (closed,
// event_ended, deleted). The page stops following the line (final).
func closedText(reason string) (heading, message string) {
	if reason == issuer.ReasonSoldOut {
		return "Sold out", "Everything in this sale has been sold. Thank you for waiting."
	}
	return "This sale has ended", "The waiting room closed before your turn came."
}

// waitWords is an estimated wait in words; "" when unknown (negative).
func waitWords(d time.Duration) string {
	switch {
	case d < 0:
		return ""
	case d < time.Minute:
		return "less than a minute"
	case d < 90*time.Minute:
		m := int((d + time.Minute/2) / time.Minute)
		if m == 1 {
			return "about 1 minute"
		}
		return "about " + strconv.Itoa(m) + " minutes"
	default:
		return "about " + strconv.Itoa(int((d+time.Hour/2)/time.Hour)) + " hours"
	}
}

// pageCSP is the waiting page's Content-Security-Policy; form-action also
// allows the return URL's origin, where the continue form's 303 leads.
func pageCSP(returnURL string) string {
	formAction := "'self'"
	if u, err := url.Parse(returnURL); err == nil && returnURL != "" {
		formAction += " " + u.Scheme + "://" + u.Host
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
		"object-src 'none'; base-uri 'none'; form-action " + formAction + "; frame-ancestors 'none'"
}

// pageHeaders sets the security headers of every page answer.
func pageHeaders(c *fiber.Ctx, returnURL string) {
	c.Set(fiber.HeaderContentSecurityPolicy, pageCSP(returnURL))
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "same-origin")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderCacheControl, "no-store")
}

// renderPage executes the page template (falling back to the built-in one
// if an operator's template fails at run time).
func (s *Server) renderPage(c *fiber.Ctx, v *PageView) error {
	var buf bytes.Buffer
	if err := s.pageTmpl.Execute(&buf, v); err != nil {
		s.log.Error("waiting page: template failed; using the built-in page", "err", err)
		buf.Reset()
		if err := builtinPage.Execute(&buf, v); err != nil {
			return err
		}
	}
	pageHeaders(c, v.Return)
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Send(buf.Bytes())
}

// POST /wait/:room/continue: the continue button without JavaScript: the
// exchange (visitor mode: the admission cookie), then 303 to the validated
// return URL, or "/" without one.
func (s *Server) pageContinue(c *fiber.Ctx) error {
	v := s.pageBase(c)
	u, err := s.user(c)
	if err != nil {
		return err
	}
	tok := strings.Clone(c.FormValue("waiting_token"))
	if tok == "" {
		return problemFor(string(flashgate.CodeBadWaiting), "no waiting token")
	}
	a, err := s.is.Exchange(c.UserContext(), v.Room, u, tok)
	var na *issuer.NotAdmittedError
	if errors.As(err, &na) {
		return problemFor(string(flashgate.CodeNotAdmitted), "not your turn yet")
	}
	if err != nil {
		return err
	}
	if s.visitors != nil {
		s.setAdmissionCookie(c, a.Token, a.ExpiresAt)
	}
	to := v.Return
	if to == "" {
		to = "/"
	}
	pageHeaders(c, v.Return)
	return c.Redirect(to, fiber.StatusSeeOther)
}

// GET /wait/assets/wait.js and wait.css.
func (s *Server) pageScript(c *fiber.Ctx) error { return pageScript.serve(c) }
func (s *Server) pageStyle(c *fiber.Ctx) error  { return pageStyle.serve(c) }

// GET /wait?room=…&return=…: the edge worker's FLASHGATE_WAITING_ROOM_URL
// is one URL for every room; this sends the browser on to /wait/{room},
// the query kept.
func (s *Server) pageByQuery(c *fiber.Ctx) error {
	room := query(c, "room")
	if !issuer.ValidID(room) {
		return problemFor(string(flashgate.CodeInvalidInput), "room is missing or malformed")
	}
	pageHeaders(c, "")
	return c.Redirect("/wait/"+room+"?"+string(c.Request().URI().QueryString()), fiber.StatusFound)
}
