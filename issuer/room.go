package issuer

import (
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/language"

	"github.com/flashgate/flashgate"
)

// RoomState is a waiting room's operating state.
type RoomState string

// Room states. Paused: entries join the line but nobody is admitted.
// Closed: new entries are refused; existing entries and admissions keep
// their status, and completions still work.
const (
	RoomOpen   RoomState = "open"
	RoomPaused RoomState = "paused"
	RoomClosed RoomState = "closed"
)

// Defaults for RoomConfig fields left zero.
const (
	DefaultCapacity        = 100
	DefaultRatePerMinute   = 600
	DefaultSessionDuration = 5 * time.Minute
	DefaultTick            = time.Second
	DefaultTickBatch       = 1000
	// DefaultArrivalWindow is how long an admitted user has to claim the
	// admission (exchange the waiting token) before it ends early.
	DefaultArrivalWindow = time.Minute
	// ArrivalWindowOff, as RoomConfig.ArrivalWindow, disables the arrival
	// window: an admission lasts the session whether it is claimed or not.
	ArrivalWindowOff time.Duration = -1
	// DefaultRoomRetention is the default Config.RoomRetention: how long a
	// room's keys live after it ends. MinRetention and MaxRetention bound
	// RoomConfig.Retention and Config.RoomRetention.
	DefaultRoomRetention = 24 * time.Hour
	MinRetention         = time.Minute
	MaxRetention         = 30 * 24 * time.Hour
	// MaxSessionDuration is the longest session duration a room may have; the
	// verifier's DefaultMaxLifetime (15 min) accepts tokens up to it.
	MaxSessionDuration = 15 * time.Minute
	// MaxIDLen is the longest room or user id, in bytes.
	MaxIDLen = 128
	// MaxPageTitle and MaxPageMessage bound RoomConfig.PageTitle and
	// PageMessage, in bytes of UTF-8.
	MaxPageTitle   = 80
	MaxPageMessage = 500
)

// RoomConfig is one waiting room's policy, stored in Redis
// (fg:{room}:config) so every issuer replica applies the same one. Its JSON
// form is the server's (server.RoomConfig, the admin API).
type RoomConfig struct {
	// Capacity is "total active users": live admissions never exceed it.
	Capacity int
	// RatePerMinute is "new users per minute": admissions in any 60 s window never exceed it.
	RatePerMinute int
	// SessionDuration is how long an admission lasts (whole seconds, 1 s … 15 min).
	SessionDuration time.Duration
	// Tick is how often each replica runs the admission step (100 ms … 1 min).
	Tick time.Duration
	// TickBatch bounds the admissions, and the lapsed admissions dropped, of one
	// tick (1 … 10000 each). Tick performs them in script calls of at most
	// MaxTickPerCall (1000) each, so a large batch never blocks Redis for
	// the whole of it.
	TickBatch int
	// State is open, paused or closed, as configured.
	State RoomState
	// ArrivalWindow is how long an admitted user has to claim the admission
	// by exchanging the waiting token (Issuer.Exchange): an admission not
	// claimed within it ends early — EXPIRED, reason not_claimed — and its
	// slot goes to the next in line at the next tick. A claim extends nothing:
	// the admission still ends a session after it began. 1 s … 15 min,
	// millisecond precision; zero means DefaultArrivalWindow (60 s) and
	// ArrivalWindowOff (negative) disables it. A window not shorter than the
	// session has no effect. Admissions keep the window of the moment they
	// were made.
	ArrivalWindow time.Duration
	// Opens and Closes are the event window (millisecond precision; zero:
	// unbounded). Before Opens an open room acts as paused — users line up,
	// nobody is admitted, no fast track — and from Closes on any room acts as
	// closed: new entries are refused and nobody more is admitted, while
	// admissions already made run to their expiry and can complete.
	// Both are judged by the room's clock (Redis TIME), not the replica's.
	// A room whose window closes ends as Close does, reason ReasonEventEnded.
	Opens, Closes time.Time
	// PreQueue orders the pre-queue — everyone who entered before the room
	// first opened (Opens, or an open after a pause): PreQueueFIFO (the
	// default, "" here) keeps arrival order; PreQueueShuffle places them in
	// a uniformly random order drawn once, atomically, when the room first
	// opens, from a secret 128-bit seed shown after the draw (Stats.Lottery,
	// lottery.go; docs/rooms.md#pre-queue-lottery). Later arrivals queue behind
	// them in arrival order. Set it before the sale begins: a room switched
	// to shuffle once anyone has been admitted, or has entered while it was
	// open, has no pre-queue (its draw is recorded as empty).
	PreQueue PreQueue
	// Retention is how long the room's keys (every one, the user index
	// included) live after the room ends — closes, sells out, its window
	// closes or it is deleted — before Redis expires them (docs/rooms.md "The end
	// of a sale"). Zero means the issuer's Config.RoomRetention (default
	// DefaultRoomRetention, 24 h); else MinRetention … MaxRetention, whole
	// milliseconds. Reopening a room keeps its keys again.
	Retention time.Duration

	// Read only: what Room reports of the room's end and origin. SetRoom
	// ignores them but CloseReason, the reason of a close when State is
	// RoomClosed ("" : ReasonClosed; Close sets it).
	//
	// CloseReason is why the room is closed in effect (ReasonSoldOut,
	// ReasonClosed, ReasonEventEnded, ReasonDeleted), or, in a room
	// reopened since, why its last line ended; "" if it never closed.
	CloseReason string
	// EndedAt is when the room ended (zero while it has not, or since it
	// was reopened); its keys expire at EndedAt + Retention.
	EndedAt time.Time
	// DeletedAt is when the room was deleted (DeleteRoom, or idle as an
	// auto room); zero otherwise.
	DeletedAt time.Time
	// Auto marks a room created by an enter under Config.DefaultRoom:
	// counted against Config.MaxAutoRooms and deleted when idle.
	Auto bool

	// The waiting page's branding (GET /wait/{room}); "" everywhere is the
	// built-in page. The scripts never read these (stored as the config
	// hash's page_title, page_message and brand_color fields).
	//
	// PageTitle is shown above the state's heading and in the document
	// title (≤ MaxPageTitle bytes of UTF-8, no control characters).
	PageTitle string
	// PageMessage is a note shown on the page (≤ MaxPageMessage bytes of
	// UTF-8, no control characters but newline; newlines break the line).
	PageMessage string
	// BrandColor is the page's accent colour, "#rrggbb" (the continue
	// button, the progress bar); "" is the built-in blue.
	BrandColor string
	// PageLanguage is the page's language when nothing in the buyer's
	// Accept-Language matches (a BCP 47 tag, e.g. "ko"; "" the
	// deployment's), and PageLanguages the languages the page may use
	// (nil: every one the deployment has); stored as page_language and
	// page_languages (comma-separated).
	PageLanguage  string
	PageLanguages []string
	// PageDoneURL is the link of the sold-out and ended pages (an absolute
	// http(s) URL, ≤ MaxPageTitle*5 bytes: back to the shop, a waitlist;
	// "" none) and PageDoneText its text (≤ MaxPageTitle bytes; "" the
	// page's own "Back to the shop" in the buyer's language).
	PageDoneURL, PageDoneText string
	// PageLogo, PageFavicon and PageStylesheet name files of the
	// deployment's page assets (the server's Options.PageDir/assets; a name
	// of letters, digits, '.', '_' and '-', ≤ 64 bytes; "" the deployment's
	// logo, favicon and site.css, if any), and PageImageOrigins are https
	// origins the page may show images from (its CSP's img-src; ≤ 8).
	PageLogo, PageFavicon, PageStylesheet string
	PageImageOrigins                      []string
	// PageTemplate names the room's page template, {name}.html in the
	// server's Options.PageDir (the same characters as an asset's name);
	// "" (or a name without a file) is the deployment's wait.html.
	PageTemplate string
}

// pageFields are the config hash's fields of the page (not the scripts'
// policy), with c's values.
func (c *RoomConfig) pageFields() [][2]any {
	return [][2]any{{"page_title", &c.PageTitle}, {"page_message", &c.PageMessage}, {"brand_color", &c.BrandColor},
		{"page_language", &c.PageLanguage}, {"page_languages", &c.PageLanguages},
		{"page_done_url", &c.PageDoneURL}, {"page_done_text", &c.PageDoneText},
		{"page_logo", &c.PageLogo}, {"page_favicon", &c.PageFavicon}, {"page_stylesheet", &c.PageStylesheet},
		{"page_image_origins", &c.PageImageOrigins}, {"page_template", &c.PageTemplate}}
}

// pageValue is a page field's value as stored.
func pageValue(p any) string {
	switch v := p.(type) {
	case *string:
		return *v
	case *[]string:
		return strings.Join(*v, ",")
	}
	return ""
}

// setPageValue sets a page field from its stored value.
func setPageValue(p any, s string) {
	switch v := p.(type) {
	case *string:
		*v = s
	case *[]string:
		*v = nil
		if s != "" {
			*v = strings.Split(s, ",")
		}
	}
}

// samePage reports whether c and d have the same page fields.
func (c RoomConfig) samePage(d RoomConfig) bool {
	a, b := c.pageFields(), d.pageFields()
	for i := range a {
		if pageValue(a[i][1]) != pageValue(b[i][1]) {
			return false
		}
	}
	return true
}

// WithDefaults returns c with every zero field set to its documented default.
func (c RoomConfig) WithDefaults() RoomConfig {
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity
	}
	if c.RatePerMinute == 0 {
		c.RatePerMinute = DefaultRatePerMinute
	}
	if c.SessionDuration == 0 {
		c.SessionDuration = DefaultSessionDuration
	}
	if c.Tick == 0 {
		c.Tick = DefaultTick
	}
	if c.TickBatch == 0 {
		c.TickBatch = DefaultTickBatch
	}
	if c.State == "" {
		c.State = RoomOpen
	}
	if c.ArrivalWindow == 0 {
		c.ArrivalWindow = DefaultArrivalWindow
	}
	if c.PreQueue == "" {
		c.PreQueue = PreQueueFIFO
	}
	return c
}

// Validate reports a flashgate.CodeInvalidInput error describing the first bad field.
func (c RoomConfig) Validate() error {
	switch {
	case c.Capacity < 1 || c.Capacity > 10_000_000:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "capacity must be 1…10000000, got %d", c.Capacity)
	case c.RatePerMinute < 1 || c.RatePerMinute > 10_000_000:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "rate_per_minute must be 1…10000000, got %d", c.RatePerMinute)
	case c.SessionDuration < time.Second || c.SessionDuration > MaxSessionDuration || c.SessionDuration%time.Second != 0:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "session must be whole seconds in 1s…%s, got %s", MaxSessionDuration, c.SessionDuration)
	case c.Tick < 100*time.Millisecond || c.Tick > time.Minute:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "tick must be 100ms…1m, got %s", c.Tick)
	case c.TickBatch < 1 || c.TickBatch > 10_000:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "batch must be 1…10000, got %d", c.TickBatch)
	case c.ArrivalWindow != ArrivalWindowOff && (c.ArrivalWindow < time.Second || c.ArrivalWindow > MaxSessionDuration || c.ArrivalWindow%time.Millisecond != 0):
		return flashgate.Errorf(flashgate.CodeInvalidInput, "arrival_window must be 0 (off) or whole milliseconds in 1s…%s, got %s", MaxSessionDuration, c.ArrivalWindow)
	case c.State != RoomOpen && c.State != RoomPaused && c.State != RoomClosed:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "state must be open, paused or closed, got %q", c.State)
	case c.PreQueue != PreQueueFIFO && c.PreQueue != PreQueueShuffle:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "prequeue must be fifo or shuffle, got %q", clip(string(c.PreQueue)))
	case c.Retention != 0 && !validRetention(c.Retention):
		return flashgate.Errorf(flashgate.CodeInvalidInput, "retention must be 0 (the default) or whole milliseconds in %s…%s, got %s", MinRetention, MaxRetention, c.Retention)
	case !c.Opens.IsZero() && c.Opens.UnixMilli() <= 0, !c.Closes.IsZero() && c.Closes.UnixMilli() <= 0:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "opens and closes must be after 1970-01-01")
	case !c.Opens.IsZero() && !c.Closes.IsZero() && !c.Closes.After(c.Opens):
		return flashgate.Errorf(flashgate.CodeInvalidInput, "closes (%s) must be after opens (%s)",
			c.Closes.UTC().Format(time.RFC3339), c.Opens.UTC().Format(time.RFC3339))
	}
	return c.validatePage()
}

// validatePage checks the page's branding fields.
func (c RoomConfig) validatePage() error {
	switch {
	case len(c.PageTitle) > MaxPageTitle:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_title must be at most %d bytes, got %d", MaxPageTitle, len(c.PageTitle))
	case !pageText(c.PageTitle, false):
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_title must be UTF-8 text without control characters")
	case len(c.PageMessage) > MaxPageMessage:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_message must be at most %d bytes, got %d", MaxPageMessage, len(c.PageMessage))
	case !pageText(c.PageMessage, true):
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_message must be UTF-8 text without control characters (newlines allowed)")
	case c.BrandColor != "" && !ValidColor(c.BrandColor):
		return flashgate.Errorf(flashgate.CodeInvalidInput, `brand_color must be "#rrggbb" (hex) or "" for the built-in, got %q`, clip(c.BrandColor))
	case c.PageLanguage != "" && !validLanguage(c.PageLanguage):
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_language must be a BCP 47 language tag, got %q", clip(c.PageLanguage))
	case len(c.PageLanguages) > 64:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_languages must have at most 64 tags")
	case len(c.PageDoneURL) > 5*MaxPageTitle:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_done_url must be at most %d bytes", 5*MaxPageTitle)
	case c.PageDoneURL != "" && !validDoneURL(c.PageDoneURL):
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_done_url must be an absolute http(s) URL, got %q", clip(c.PageDoneURL))
	case len(c.PageDoneText) > MaxPageTitle:
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_done_text must be at most %d bytes, got %d", MaxPageTitle, len(c.PageDoneText))
	case !pageText(c.PageDoneText, false):
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_done_text must be UTF-8 text without control characters")
	}
	for _, f := range [][2]string{{"page_logo", c.PageLogo}, {"page_favicon", c.PageFavicon}, {"page_stylesheet", c.PageStylesheet}, {"page_template", c.PageTemplate}} {
		if f[1] != "" && !ValidAssetName(f[1]) {
			return flashgate.Errorf(flashgate.CodeInvalidInput, "%s must name a page asset (letters, digits, '.', '_', '-'; at most 64 bytes), got %q", f[0], clip(f[1]))
		}
	}
	if len(c.PageImageOrigins) > 8 {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "page_image_origins must have at most 8 origins")
	}
	for _, o := range c.PageImageOrigins {
		if u, err := url.Parse(o); err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" || u.RawQuery != "" ||
			u.User != nil || u.Fragment != "" || strings.ContainsAny(o, ",; '\"") {
			return flashgate.Errorf(flashgate.CodeInvalidInput, "page_image_origins must be https origins (https://host[:port]), got %q", clip(o))
		}
	}
	for _, l := range c.PageLanguages {
		if !validLanguage(l) {
			return flashgate.Errorf(flashgate.CodeInvalidInput, "page_languages must be BCP 47 language tags, got %q", clip(l))
		}
	}
	return nil
}

// ValidAssetName reports whether s can name a page asset: 1 … 64 bytes of
// ASCII letters, digits, '.', '_' and '-', not starting with '.'.
func ValidAssetName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// validLanguage reports whether s is a BCP 47 language tag (at most 35
// bytes; no comma, the stored list's separator).
func validLanguage(s string) bool {
	if len(s) > 35 || strings.ContainsAny(s, ", ") {
		return false
	}
	_, err := language.Parse(s)
	return err == nil
}

// validDoneURL reports whether s is an absolute http(s) URL with a host.
func validDoneURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && pageText(s, false)
}

// pageText reports whether s is valid UTF-8 without control characters (C0,
// DEL, C1), newlines allowed when newline is set.
func pageText(s string, newline bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return (r < 0x20 || r >= 0x7f && r < 0xa0) && !(newline && r == '\n')
	})
}

// ValidColor reports whether s is a "#rrggbb" hex colour (either case).
func ValidColor(s string) bool {
	if len(s) != 7 || s[0] != '#' {
		return false
	}
	for i := 1; i < 7; i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// windowMs returns t in Unix ms, or 0 for the zero time (unbounded).
func windowMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// windowTime is windowMs's inverse.
func windowTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// arrivalMs is the arrival window as the config hash's arrival_ms: 0 when
// off (ArrivalWindowOff); arrivalWindow is its inverse.
func arrivalMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return d.Milliseconds()
}

func arrivalWindow(ms int64) time.Duration {
	if ms <= 0 {
		return ArrivalWindowOff // absent (a room from before the setting) or 0: off
	}
	return time.Duration(ms) * time.Millisecond
}

// validRetention: MinRetention … MaxRetention, whole milliseconds.
func validRetention(d time.Duration) bool {
	return d >= MinRetention && d <= MaxRetention && d%time.Millisecond == 0
}

// validCloseReason: a reason an operator may close a room with (Close);
// ReasonDeleted is DeleteRoom's own.
func validCloseReason(r string) bool {
	return r == ReasonSoldOut || r == ReasonClosed || r == ReasonEventEnded
}

// policy encodes c as the scripts' create-room argument (lua/prelude.lua
// ARGV[2]): "state,capacity,rate,session_ms,batch,tick_ms,opens_ms,closes_ms,arrival_ms,prequeue,seed,auto",
// seed being the room's lottery seed ("-": none; see Issuer.createArg,
// which gives every shuffle room created from it a fresh one), auto "1" for
// an auto room (RoomConfig.Auto), else "0".
func (c RoomConfig) policy(seed string) string {
	auto := 0
	if c.Auto {
		auto = 1
	}
	return fmt.Sprintf("%s,%d,%d,%d,%d,%d,%d,%d,%d,%s,%s,%d", c.State, c.Capacity, c.RatePerMinute,
		c.SessionDuration.Milliseconds(), c.TickBatch, c.Tick.Milliseconds(), windowMs(c.Opens), windowMs(c.Closes),
		arrivalMs(c.ArrivalWindow), c.preQueue(), seed, auto)
}

// preQueue is c.PreQueue, "" read as the default (fifo).
func (c RoomConfig) preQueue() PreQueue {
	if c.PreQueue == "" {
		return PreQueueFIFO
	}
	return c.PreQueue
}

// ValidID reports whether s is a valid room or user id: 1…128 bytes of
// ASCII letters, digits and - _ . ~ @ + =. The charset keeps ids out of Redis
// key syntax (no '{', '}', ':') and free of control characters and spaces.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == '~' || c == '@' || c == '+' || c == '=':
		default:
			return false
		}
	}
	return true
}

func checkRoom(room string) error {
	if !ValidID(room) {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "invalid room id %q: want 1…128 of [A-Za-z0-9-_.~@+=]", clip(room))
	}
	return nil
}

func checkUser(user string) error {
	if !ValidID(user) {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "invalid user id %q: want 1…128 of [A-Za-z0-9-_.~@+=]", clip(user))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
