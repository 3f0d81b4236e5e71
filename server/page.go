package server

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/tdewolff/minify/v2"
	"github.com/tdewolff/minify/v2/css"
	"github.com/tdewolff/minify/v2/js"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

// The waiting-room page (GET /wait/{room}): server-rendered from
// page/wait.html (or Options.PageDir's wait.html), kept live by
// page/wait.js over the browser client, styled by page/wait.css. No build
// step, no framework, no inline script or style (the CSP forbids them).

//go:embed page/wait.html page/wait.js page/wait.css page/flashgate-client.js
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
	pageScript = newAsset(minified("text/javascript", mustRead("page/wait.js")), jsType)
	pageStyle  = newAsset(minified("text/css", mustRead("page/wait.css")), "text/css; charset=utf-8")
	// inlineScript is the built-in page's one script: the browser client
	// and wait.js as one module (minified), inline so that the page is live
	// after its first round trip (docs/performance.md); the CSP allows it by
	// its hash. inlineStyle is wait.css, inline so that nothing blocks the
	// first paint.
	inlineScript = bundle(mustRead("page/flashgate-client.js"), mustRead("page/wait.js"))
	inlineStyle  = string(minified("text/css", mustRead("page/wait.css")))
	// builtinPage is the embedded template, parsed once.
	builtinPage = template.Must(template.New(PageTemplate).Parse(string(mustRead("page/" + PageTemplate))))
)

// minified is src minified (comments and white space dropped, local names
// shortened) by tdewolff/minify; mediatype "text/javascript" (an ES module)
// or "text/css".
func minified(mediatype string, src []byte) []byte {
	m := minify.New()
	m.AddFunc("text/javascript", js.Minify)
	m.AddFunc("text/css", css.Minify)
	out, err := m.Bytes(mediatype, src)
	if err != nil {
		panic(fmt.Sprintf("server: minifying the page's %s: %v", mediatype, err))
	}
	return out
}

// bundle is the client module and wait.js as one module: wait.js's import
// of the client dropped, its code in a block of its own (its names shadow
// none of the client's), minified.
func bundle(client, wait []byte) string {
	const imp = `import { createClient } from "/flashgate-client.js";`
	if !bytes.Contains(wait, []byte(imp)) {
		panic("server: wait.js does not import the client as bundle expects")
	}
	src := string(client) + "\n{\n" + strings.Replace(string(wait), imp, "", 1) + "\n}\n"
	return string(minified("text/javascript", []byte(src)))
}

// cspHash is the CSP source of an inline element's content ('sha256-…').
func cspHash(content string) string {
	sum := sha256.Sum256([]byte(content))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

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

// PageTemplateVersion is the version of PageView, the variables a page
// template gets (docs/browser.md#page-templates-and-preview): a new field is a new
// minor feature of the same version; a removed or changed one a new version.
const PageTemplateVersion = 2

// PageView is what the waiting page's template gets (an Options.PageDir
// template included), version PageTemplateVersion. Keep the element ids and
// data- attributes of the built-in page/wait.html for wait.js to drive it:
// wait.js fills only the data slots (#heading, #message, #position,
// #ahead, #eta, #opens-at, #countdown, #live) and never the operator's text
// (#room-title, #room-message, #done).
type PageView struct {
	// Version is PageTemplateVersion.
	Version int
	// Preview marks a preview (GET /admin/rooms/{room}/preview): sample
	// data, and wait.js follows no line (data-preview).
	Preview bool
	// Lang is the negotiated language (a BCP 47 tag, <html lang>), Dir its
	// direction ("ltr" or "rtl"), Languages the room's languages for the
	// switcher (a GET form of "lang"), Text the language's catalog as JSON
	// for wait.js (<script type="application/json" id="fg-text">). T
	// (method) gives a message of the catalog: {{.T "place.ahead"}}.
	Lang, Dir string
	Languages []PageLanguage
	Text      template.JS
	// Room is the room id of the request's path, for the data- attributes
	// and form targets: it may name no room (any text a link holds). Name is
	// what the page shows as the room's name: Room once the room is known to
	// exist, else "" (the page never echoes a path as a title).
	Room, Name string
	State      string // waiting, paused, opens, active, closed, ended, unknown, reconnecting, error, checking, invited
	// Heading and Message describe the state in words (the catalog's
	// HeadingKey and MessageKey).
	Heading, Message       string
	HeadingKey, MessageKey string
	// HasPlace: Position, Ahead, TotalWaiting and Wait are set (WAITING).
	HasPlace bool
	// PreQueue: WAITING in a shuffle room's pre-queue, the place not drawn
	// yet (issuer.Entry.PreQueue): no Position or Ahead, TotalWaiting set.
	PreQueue                      bool
	Position, Ahead, TotalWaiting int64
	// Wait is the estimated wait in words ("about 3 minutes"), WaitMs in
	// milliseconds; "" and -1 unknown.
	Wait   string
	WaitMs int64
	// PollMs is the issuer's poll hint; Refresh the meta refresh in
	// seconds (0: none).
	PollMs  int64
	Refresh int
	// Beacon: the page polls the room beacon instead of its status or an
	// event stream (Options.Beacon; roombeacon.go).
	Beacon bool
	// RefreshURL, when set, is where the meta refresh leads (the shared
	// estimate page of a buyer far from the front on the beacon:
	// pageestimate.go); "" reloads the page.
	RefreshURL string
	// Estimated: Position and Ahead are estimates (the estimate page shows
	// them as ≈ n). EstimateArrival is the estimate page's arrival number
	// (the language form keeps it), EstimateOf the buyer's own page, where
	// wait.js goes at once (the estimate page is for pages without script).
	Estimated       bool
	EstimateArrival int64
	EstimateOf      string
	// OpensAtMs, OpensAtISO (RFC 3339) and OpensAt ("2006-01-02 15:04
	// UTC"): when the event window opens (state opens).
	OpensAtMs           int64
	OpensAtISO, OpensAt string
	// WaitingToken is the shopper's own waiting token (the page is no-store).
	WaitingToken string
	// Return is the validated return URL (Server.ReturnURL), "" when none.
	Return string
	// Code is the problem code of an error state.
	Code string
	// Script, Style and Client are the asset paths; ContinueAction the
	// form's target (POST /wait/{room}/continue).
	Script, Style, Client, ContinueAction string
	// InlineScript and InlineStyle are the same script (the client
	// bundled in) and stylesheet (with the room's brand colour) to inline,
	// <script type="module">{{.InlineScript}}</script> and
	// <style>{{.InlineStyle}}</style> exactly: the page's CSP allows them
	// by their SHA-256, so nothing may be added inside the elements.
	InlineScript template.JS
	InlineStyle  template.CSS
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
	// RoomMessageHTML is page_message rendered: text, its Markdown links
	// [text](https://…) as links (http(s) and mailto only), newlines as
	// <br>; "" for none.
	RoomMessageHTML template.HTML
	// PageMessage is page_message as set (wait.js compares a live one).
	PageMessage string
	// Logo, Favicon and SiteStyle are the paths of the room's (or the
	// deployment's) logo, favicon and stylesheet among the page's assets
	// (Options.PageDir/assets, served by flashgate); "" for none.
	Logo, Favicon, SiteStyle string
	// DoneURL and DoneText are the operator's link of the final pages
	// (sold out, ended: page_done_url, page_done_text; DoneText "" is the
	// catalog's done.link); DoneURL "" for none.
	DoneURL, DoneText string
	// LotteryCommitment (PreQueue only) is the room's lottery commitment,
	// and ReceiptHref a data: URL of the JSON file of the entry's join
	// receipt ({"receipt", "room", "arrival", "lottery_commitment",
	// "room_view"}) for a download link; "" without one (docs/rooms.md "Pre-queue
	// lottery").
	LotteryCommitment string
	ReceiptHref       template.URL
	// LotteryBeacon (with LotteryCommitment) is true when the room's draw
	// also uses a public beacon round (issuer.Entry.LotteryRandomness not
	// issuer.OperatorChosen): the page then says nobody could know the order
	// in advance, else that the operator could (issue 36).
	LotteryBeacon bool

	// The language: the room's set, the request's ?lang= and
	// Accept-Language (negotiated by renderPage), the catalog picked and
	// the message's arguments.
	langs       *catalogs
	set         *langSet
	override    string
	accept      string
	cat         *catalog
	messageArgs []any
	brandCSS    string
	assets      pageAssets
	imgOrigins  []string
	template    string
	// estimate is the arrival number of the estimate page the meta refresh
	// leads to (0: none; beaconRefresh); shared marks a page every buyer
	// gets the same bytes of (the estimate page): cacheable, no Vary on
	// Accept-Language.
	estimate int64
	shared   bool
}

// PageLanguage is one entry of the page's language switcher.
type PageLanguage struct {
	Tag, Name string // "de", "Deutsch"
	Selected  bool
}

// T is the catalog's message key in the page's language, its arguments
// name, value pairs ({{.T "eta.minutes" "count" 3}}); the key itself when
// the catalog lacks it.
func (v *PageView) T(key string, args ...any) string {
	if v.cat == nil {
		return key
	}
	return v.cat.text(key, args...)
}

// N is n formatted for the page's language.
func (v *PageView) N(n int64) string {
	if v.cat == nil {
		return strconv.FormatInt(n, 10)
	}
	return v.cat.number(n)
}

// say sets the state and its words: the catalog's state.{words}.heading and
// message (msgKey, when not "", a message key of its own), with args.
func (v *PageView) say(state, words, msgKey string, args ...any) {
	v.State = state
	v.HeadingKey = "state." + words + ".heading"
	v.MessageKey = "state." + words + ".message"
	if msgKey != "" {
		v.MessageKey = msgKey
	}
	v.messageArgs = args
}

// finish negotiates the language and puts the words in it.
func (v *PageView) finish() {
	if v.set == nil {
		v.set = v.langs.set("", nil)
	}
	c := v.set.negotiate(v.override, v.accept)
	v.cat, v.Lang, v.Dir, v.Text, v.Version = c, c.name, c.dir, template.JS(c.json), PageTemplateVersion //nolint:gosec // JSON from json.Marshal: <, > and & escaped
	v.Languages = make([]PageLanguage, len(v.set.cats))
	for i, o := range v.set.cats {
		v.Languages[i] = PageLanguage{Tag: o.name, Name: o.msgs["language.name"], Selected: o == c}
	}
	if v.HeadingKey != "" {
		v.Heading = c.text(v.HeadingKey)
		v.Message = c.text(v.MessageKey, v.messageArgs...)
	}
	if v.WaitMs >= 0 && (v.HasPlace || v.PreQueue) {
		v.Wait = waitWords(c, time.Duration(v.WaitMs)*time.Millisecond)
	}
	if v.DoneURL != "" && v.DoneText == "" {
		v.DoneText = c.text("done.link")
	}
	v.InlineScript = template.JS(inlineScript)             //nolint:gosec // our own script, minified at startup
	v.InlineStyle = template.CSS(inlineStyle + v.brandCSS) //nolint:gosec // our own stylesheet and a validated colour
}

// mdLink is a Markdown link of page_message: [text](url) with an http(s)
// or mailto URL.
var mdLink = regexp.MustCompile(`\[([^\]\n]{1,200})\]\(((?:https?://|mailto:)[^\s()<>"]{1,400})\)`)

// messageHTML renders page_message: text (escaped), its Markdown links as
// links, newlines as <br>; nothing else of Markdown.
func messageHTML(msg string) template.HTML {
	var b strings.Builder
	for i, line := range strings.Split(msg, "\n") {
		if i > 0 {
			b.WriteString("<br>")
		}
		last := 0
		for _, m := range mdLink.FindAllStringSubmatchIndex(line, -1) {
			b.WriteString(template.HTMLEscapeString(line[last:m[0]]))
			b.WriteString(`<a href="` + template.HTMLEscapeString(line[m[4]:m[5]]) + `" rel="noopener">`)
			b.WriteString(template.HTMLEscapeString(line[m[2]:m[3]]) + "</a>")
			last = m[1]
		}
		b.WriteString(template.HTMLEscapeString(line[last:]))
	}
	return template.HTML(b.String()) //nolint:gosec // every part escaped above; hrefs are http(s) or mailto
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
	return parsePage(filepath.Join(dir, PageTemplate))
}

// loadRoomPages returns the other templates of Options.PageDir ({name}.html
// but wait.html, each parsed and tried like wait.html) by name: the
// templates a room picks with issuer.RoomConfig.PageTemplate.
func loadRoomPages(dir string) (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	if dir == "" {
		return out, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.html"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".html")
		if filepath.Base(f) == PageTemplate {
			continue
		}
		if !issuer.ValidAssetName(name) {
			return nil, fmt.Errorf("server: Options.PageDir: %s: a template's name is letters, digits, '.', '_', '-'", f)
		}
		if out[name], err = parsePage(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parsePage parses the page template in the file name and tries it on a
// sample view.
func parsePage(name string) (*template.Template, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("server: Options.PageDir: %w", err)
	}
	t, err := template.New(PageTemplate).Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("server: Options.PageDir: %s does not parse: %w", name, err)
	}
	sample := &PageView{Room: "sample", State: pageWaiting, HasPlace: true, Position: 3, Ahead: 2, TotalWaiting: 9,
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
	v := &PageView{Room: room, Script: pageScriptPath, Style: pageStylePath, Client: clientPath, WaitMs: -1,
		ContinueAction: "/wait/" + url.PathEscape(room) + "/continue", InviteAction: "/wait/" + url.PathEscape(room),
		langs: s.langs, override: query(c, "lang"), accept: c.Get(fiber.HeaderAcceptLanguage), assets: s.assets}
	v.Logo = s.assets.first("logo.svg", "logo.png", "logo.webp", "logo.jpg")
	v.Favicon = s.assets.first("favicon.ico", "favicon.svg", "favicon.png")
	v.SiteStyle = s.assets.path("site.css")
	if v.override == "" {
		v.override = strings.Clone(c.FormValue("lang"))
	}
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
		v.say(pageClosed, "closed", "")
		// The room's close reason picks the words, as for a CLOSED entry; a
		// failed read keeps the generic ones.
		if cfg, err := s.is.Room(c.UserContext(), v.Room); err == nil {
			v.brand(cfg)
			if cfg.CloseReason != "" {
				v.say(pageClosed, closedText(cfg.CloseReason), "")
			}
		}
	case string(flashgate.CodeRoomLimit):
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(p.kind.RetryAfter))
		v.say(pageUnknown, "unknown", "")
	case string(flashgate.CodeUnknownRoom), string(flashgate.CodeInvalidInput):
		v.say(pageUnknown, "unknown", "")
	case string(flashgate.CodeUnavailable), string(flashgate.CodeStoreFull), problem.RateLimited:
		secs := max(1, p.kind.RetryAfter)
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
		v.say(pageReconnecting, "reconnecting", "")
		v.Refresh = secs
	case string(flashgate.CodeNotAdmitted):
		v.say(pageWaiting, "waiting", "state.notyet.message")
		v.Refresh = 2
	case string(flashgate.CodeInviteInvalid), string(flashgate.CodeInviteScope), string(flashgate.CodeInviteExpired),
		string(flashgate.CodeInviteUsed):
		v.say(pageEnded, "badinvite", map[string]string{
			string(flashgate.CodeInviteInvalid): "state.badinvite.invalid",
			string(flashgate.CodeInviteScope):   "state.badinvite.scope",
			string(flashgate.CodeInviteExpired): "state.badinvite.expired",
			string(flashgate.CodeInviteUsed):    "state.badinvite.used",
		}[p.Code])
	case string(flashgate.CodeBanned):
		v.say(pageEnded, "banned", "")
		if p.BannedUntilMs > 0 {
			v.say(pageEnded, "banned", "state.banned.until", "time", utcTime(time.UnixMilli(p.BannedUntilMs)))
		}
	default:
		v.say(pageError, "error", "", "code", p.Code)
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
		v.say(pageChecking, "checking", "")
		return s.renderPage(c, v)
	}
	e, err := s.is.Enter(c.UserContext(), v.Room, u)
	if err != nil {
		return s.bannedProblem(err)
	}
	v.Name = v.Room
	v.entry(e)
	v.Beacon = e.State == flashgate.StateWaiting && s.beaconWanted()
	s.beaconRefresh(c, v, e)
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
			v.say(pageOpens, "opens", "")
			if v.PreQueue {
				v.say(pageOpens, "opens", "state.prequeue.message")
			}
			v.OpensAtMs = opens.UnixMilli()
			v.OpensAtISO = opens.UTC().Format(time.RFC3339)
			v.OpensAt = utcTime(opens)
		}
	}
	return s.renderPage(c, v)
}

// invited fills v as an invite link's confirmation page: a form that posts
// the invite (pageInvite). The room's name and branding show when it exists
// (an auto room may not yet: the POST creates it).
func (s *Server) invited(c *fiber.Ctx, v *PageView, invite string) *PageView {
	v.Invite = invite
	v.say(pageInvited, "invited", "")
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
	q := url.Values{}
	if v.Return != "" {
		q.Set("return", v.Return)
	}
	if v.override != "" {
		q.Set("lang", v.override)
	}
	to := v.InviteAction
	if len(q) > 0 {
		to += "?" + q.Encode()
	}
	pageHeaders(c, v.Return)
	return c.Redirect(to, fiber.StatusSeeOther)
}

// brand fills v's branding and languages from the room's config.
func (v *PageView) brand(cfg issuer.RoomConfig) {
	v.RoomTitle = cfg.PageTitle
	if cfg.PageMessage != "" {
		v.RoomMessage = strings.Split(cfg.PageMessage, "\n")
		v.RoomMessageHTML, v.PageMessage = messageHTML(cfg.PageMessage), cfg.PageMessage
	}
	v.DoneURL, v.DoneText = cfg.PageDoneURL, cfg.PageDoneText
	for _, f := range []struct {
		name string
		dst  *string
	}{{cfg.PageLogo, &v.Logo}, {cfg.PageFavicon, &v.Favicon}, {cfg.PageStylesheet, &v.SiteStyle}} {
		if p := v.assets.path(f.name); p != "" {
			*f.dst = p
		}
	}
	v.imgOrigins, v.template = cfg.PageImageOrigins, cfg.PageTemplate
	if v.langs != nil {
		v.set = v.langs.set(cfg.PageLanguage, cfg.PageLanguages)
	}
	if cfg.BrandColor != "" {
		// The colour in the query: a new colour is a new URL, so the
		// stylesheet may be cached.
		v.BrandStyle = "/wait/" + url.PathEscape(v.Room) + "/brand.css?v=" + strings.ToLower(cfg.BrandColor[1:])
		v.brandCSS = brandCSS(cfg.BrandColor)
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
	if css := brandCSS(cfg.BrandColor); css != "" {
		body = css + "\n"
	}
	c.Set(fiber.HeaderCacheControl, assetMaxAge)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderContentType, "text/css; charset=utf-8")
	return c.SendString(body)
}

// brandCSS is the custom properties of the brand colour col ("#rrggbb"),
// "" for none or an invalid one.
func brandCSS(col string) string {
	if !issuer.ValidColor(col) {
		return ""
	}
	col = strings.ToLower(col)
	return ":root{--accent:" + col + ";--on-accent:" + onAccent(col) + "}"
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
		v.LotteryBeacon = e.LotteryRandomness != "" && e.LotteryRandomness != issuer.OperatorChosen
		v.PollMs = e.PollAfter.Milliseconds()
		v.Refresh = int(max(1, (e.PollAfter+time.Second-1)/time.Second))
		v.WaitMs = e.EstimatedWait.Milliseconds()
		if e.EstimatedWait < 0 {
			v.WaitMs = -1
		}
		switch e.RoomState {
		case issuer.RoomClosed:
			v.say(pageClosed, "closed", "")
			v.Refresh = 0
		case issuer.RoomPaused:
			v.say(pagePaused, "paused", "")
		default:
			v.say(pageWaiting, "waiting", "")
			if e.Lane == flashgate.LanePriority { // wait.js's "priority" text
				v.say(pageWaiting, "priority", "")
			}
		}
		if e.PreQueue && v.State != pageClosed {
			v.MessageKey = "state.prequeue.message"
		}
	case flashgate.StateActive:
		v.say(pageActive, "active", "")
	case flashgate.StateClosed:
		v.say(pageClosed, closedText(e.Reason), "")
	default:
		v.say(pageEnded, "ended", "")
	}
}

// closedText is the words (the catalog's state.{name}) of a CLOSED entry,
// by its reason: "soldout" (Sold out) for sold_out, "saleended" (This sale
// has ended) otherwise (closed, event_ended, deleted). The page stops
// following the line (final).
func closedText(reason string) string {
	if reason == issuer.ReasonSoldOut {
		return "soldout"
	}
	return "saleended"
}

// waitWords is an estimated wait in c's words; "" when unknown (negative).
// wait.js has the same rule (waitWords).
func waitWords(c *catalog, d time.Duration) string {
	switch {
	case d < 0:
		return ""
	case d < time.Minute:
		return c.text("eta.soon")
	case d < 90*time.Minute:
		return c.text("eta.minutes", "count", int64((d+time.Minute/2)/time.Minute))
	default:
		return c.text("eta.hours", "count", int64((d+time.Hour/2)/time.Hour))
	}
}

// utcTime is t in the page's language-neutral form with its UTC offset,
// "2006-01-02 15:04 UTC": the page without JavaScript (wait.js shows the
// buyer's own time zone, formatted for the language).
func utcTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// pageCSP is the waiting page's Content-Security-Policy; form-action also
// allows the return URL's origin, where the continue form's 303 leads.
// The inline script's and style's hashes, when given (v's), are allowed
// too: nothing else inline is.
func pageCSP(returnURL string, v *PageView) string {
	formAction := "'self'"
	if u, err := url.Parse(returnURL); err == nil && returnURL != "" {
		formAction += " " + u.Scheme + "://" + u.Host
	}
	script, style, img := "'self'", "'self'", "'self' data:"
	if v != nil {
		script += " " + inlineScriptHash
		style += " " + cspHash(string(v.InlineStyle))
		for _, o := range v.imgOrigins { // validated https origins (issuer.RoomConfig.PageImageOrigins)
			img += " " + o
		}
	}
	return "default-src 'self'; script-src " + script + "; style-src " + style + "; img-src " + img + "; connect-src 'self'; " +
		"object-src 'none'; base-uri 'none'; form-action " + formAction + "; frame-ancestors 'none'"
}

// inlineScriptHash is inlineScript's CSP source.
var inlineScriptHash = cspHash(inlineScript)

// pageHeaders sets the security headers of every page answer (v: the page
// rendered, nil for a redirect).
func pageHeaders(c *fiber.Ctx, returnURL string, v ...*PageView) {
	var pv *PageView
	if len(v) > 0 {
		pv = v[0]
	}
	c.Set(fiber.HeaderContentSecurityPolicy, pageCSP(returnURL, pv))
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "same-origin")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderCacheControl, "no-store")
}

// renderPage executes the page template (falling back to the built-in one
// if an operator's template fails at run time).
func (s *Server) renderPage(c *fiber.Ctx, v *PageView) error {
	if v.langs == nil {
		v.langs = s.langs
	}
	v.finish()
	if v.estimate > 0 {
		v.RefreshURL = estimateURL(v.Room, v.estimate, v.Lang, v.Return)
	}
	var buf bytes.Buffer
	tmpl := s.pageTmpl
	if t, ok := s.roomPages[v.template]; ok {
		tmpl = t
	}
	if err := tmpl.Execute(&buf, v); err != nil {
		s.log.Error("waiting page: template failed; using the built-in page", "err", err)
		buf.Reset()
		if err := builtinPage.Execute(&buf, v); err != nil {
			return err
		}
	}
	pageHeaders(c, v.Return, v)
	c.Set(fiber.HeaderContentLanguage, v.Lang)
	if v.shared {
		c.Set(fiber.HeaderCacheControl, beaconCacheControl)
	} else {
		c.Vary(fiber.HeaderAcceptLanguage)
	}
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

// PreviewStates are the states GET /admin/rooms/{room}/preview renders
// (?state=), in the order the docs show them.
var PreviewStates = []string{"checking", "invited", "prequeue", "opens", "waiting", "priority", "paused", "reconnecting",
	"admitted", "stopped", "soldout", "saleended", "ended", "unclaimed", "error", "unknown"}

// GET /admin/rooms/:room/preview?state=…&lang=…: the room's waiting page in
// one state with sample data (place 42, 41 ahead, about 7 minutes; an
// opening an hour from now), with the room's branding and languages, for
// designers and QA. The page is marked data-preview: wait.js fills its
// slots (the countdown, the times) but follows no line. An unknown state
// is 400 invalid_input.
func (s *Server) adminPreview(c *fiber.Ctx) error {
	room := param(c, "room")
	cfg, err := s.is.Room(c.UserContext(), room)
	if err != nil {
		return err
	}
	state := query(c, "state")
	if state == "" {
		state = "waiting"
	}
	v := s.pageBase(c)
	v.Name, v.Preview = room, true
	v.brand(cfg)
	place := func() {
		v.HasPlace, v.Position, v.Ahead, v.TotalWaiting, v.WaitMs = true, 42, 41, 1200, (7 * time.Minute).Milliseconds()
		v.WaitingToken, v.PollMs, v.Refresh = "preview", 2000, 2
	}
	switch state {
	case "checking":
		v.say(pageChecking, "checking", "")
	case "invited":
		v.Invite = "preview"
		v.say(pageInvited, "invited", "")
	case "prequeue", "opens":
		opens := s.now().Add(time.Hour).Truncate(time.Minute)
		v.say(pageOpens, "opens", "")
		v.OpensAtMs, v.OpensAtISO, v.OpensAt = opens.UnixMilli(), opens.UTC().Format(time.RFC3339), utcTime(opens)
		v.WaitingToken, v.PollMs, v.Refresh = "preview", 10000, 10
		if state == "prequeue" {
			v.PreQueue, v.TotalWaiting, v.MessageKey = true, 1200, "state.prequeue.message"
			v.LotteryCommitment = strings.Repeat("0123456789abcdef", 4)
		} else {
			place()
		}
	case "waiting", "priority", "paused", "reconnecting":
		place()
		v.say(map[string]string{"waiting": pageWaiting, "priority": pageWaiting, "paused": pagePaused, "reconnecting": pageReconnecting}[state], state, "")
	case "admitted":
		v.WaitingToken = "preview"
		v.say(pageActive, "active", "")
	case "stopped":
		v.say(pageClosed, "closed", "")
	case "soldout", "saleended":
		v.say(pageClosed, state, "")
	case "ended", "unclaimed":
		v.say(pageEnded, state, "")
	case "error":
		v.say(pageError, "error", "", "code", "unavailable")
	case "unknown":
		v.say(pageUnknown, "unknown", "")
		v.Name = ""
	default:
		return problemFor(string(flashgate.CodeInvalidInput), "state must be one of "+strings.Join(PreviewStates, ", "))
	}
	return s.renderPage(c, v)
}
