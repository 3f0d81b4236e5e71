package issuer

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

// SetRoom creates or replaces room's configuration (zero fields take their
// defaults) and registers the room with the tick loop. Changes apply to the
// next script run on every replica. The write is one script
// (lua/configure.lua): a pre-queue lottery due under the configuration in
// effect until now is drawn first; a shuffle room gets its secret seed if it
// has none (never replaced); a room switched to shuffle after its sale has
// begun gets an empty draw (RoomConfig.PreQueue). A change that closes the
// room in effect (State RoomClosed, or Closes in the past) ends it as Close
// does, with c.CloseReason (default ReasonClosed; docs/rooms.md "The end of a
// sale"); one that reopens an ended room (State open or paused, Closes
// later) starts a new line — the closed one stays CLOSED — and keeps the
// room's keys again (PERSIST). Errors: flashgate.ErrInvalidInput,
// flashgate.ErrUnavailable, flashgate.ErrStoreFull.
func (is *Admin) SetRoom(ctx context.Context, room string, c RoomConfig) (RoomConfig, error) {
	return is.setRoom(ctx, room, c, false)
}

// setRoom is SetRoom; del also deletes the room (DeleteRoom).
func (is *Admin) setRoom(ctx context.Context, room string, c RoomConfig, del bool) (RoomConfig, error) {
	if err := checkRoom(room); err != nil {
		return RoomConfig{}, err
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return RoomConfig{}, err
	}
	seed := ""
	if c.PreQueue == PreQueueShuffle {
		seed = newLotterySeed()
	}
	reason := ""
	if c.State == RoomClosed && validCloseReason(c.CloseReason) {
		reason = c.CloseReason
	}
	fields := []any{
		"state", string(c.State), "capacity", c.Capacity, "rate", c.RatePerMinute,
		"session_ms", c.SessionDuration.Milliseconds(), "batch", c.TickBatch, "tick_ms", c.Tick.Milliseconds(),
		"opens_ms", windowMs(c.Opens), "closes_ms", windowMs(c.Closes), "arrival_ms", arrivalMs(c.ArrivalWindow),
		"prequeue", string(c.PreQueue), "retention_ms", c.Retention.Milliseconds()}
	fields = append(append(fields, pageArgs(&c)...), "journal_maxlen", is.journalMaxLen())
	v, err := is.db.Configure(ctx, room, store.ConfigureArgs{Seed: seed, Reason: reason,
		RetentionMs: is.cfg.RoomRetention.Milliseconds(), Delete: del, Fields: fields})
	if err != nil {
		return RoomConfig{}, err
	}
	is.snaps.forget(room) // this replica answers the new state at once (others within a snapshot's age)
	c.EndedAt, c.DeletedAt = windowTime(v.EndedMs), windowTime(v.DeletedMs)
	c.CloseReason = v.CloseReason
	if del && v.Waiting == 0 {
		// Nothing to drain: out of the listings at once (the tick takes
		// out one that had a line, once drained).
		err = is.cfg.Redis.SRem(ctx, keyRooms, room).Err()
	} else {
		err = is.cfg.Redis.SAdd(ctx, keyRooms, room).Err()
	}
	if err != nil {
		return RoomConfig{}, unavailable(err)
	}
	if c.Auto && !c.DeletedAt.IsZero() {
		is.freeAutoRoom(ctx, room)
	}
	if c.PreQueue == PreQueueShuffle && !del {
		is.journalCommitment(ctx, room)
	}
	is.remember(room, c)
	return c, nil
}

// Close closes room with reason (ReasonSoldOut, ReasonClosed or
// ReasonEventEnded; "" for ReasonClosed): new entries are refused, every
// waiting entry reads CLOSED with the reason at once (status, events, the
// page), nobody more is admitted, admissions already made run to their
// expiry and can complete, the line is drained by the tick in bounded
// steps, and the room's keys expire its retention after now. Closing a room
// already closed replaces the reason and nothing else. Reopening it
// (SetState, SetRoom) starts a new line.
// Errors: flashgate.ErrInvalidInput (a bad reason), flashgate.ErrUnknownRoom,
// flashgate.ErrUnavailable.
func (is *Admin) Close(ctx context.Context, room, reason string) (RoomConfig, error) {
	if reason == "" {
		reason = ReasonClosed
	}
	if !validCloseReason(reason) {
		return RoomConfig{}, flashgate.Errorf(flashgate.CodeInvalidInput, "reason must be %s, %s or %s, got %q",
			ReasonSoldOut, ReasonClosed, ReasonEventEnded, clip(reason))
	}
	c, err := is.Room(ctx, room)
	if err != nil {
		return RoomConfig{}, err
	}
	c.State, c.CloseReason = RoomClosed, reason
	return is.SetRoom(ctx, room, c)
}

// SoldOut closes room with ReasonSoldOut (Close): every waiting buyer reads
// CLOSED, reason sold_out. Errors as Close.
func (is *Admin) SoldOut(ctx context.Context, room string) (RoomConfig, error) {
	return is.Close(ctx, room, ReasonSoldOut)
}

// DeleteRoom deletes room: it closes as Close does (reason ReasonDeleted,
// unless it had already ended: a sold-out room stays sold out), its enters
// answer flashgate.ErrUnknownRoom, it leaves the room listing (Rooms) once
// its line is drained, and its keys expire its retention after it ended.
// Until then Room and Stats still answer it (DeletedAt set), status answers
// its entries, and admissions already made can complete. SetRoom with state
// open or paused restores it, with a new line. Repeating it changes nothing.
// Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom, flashgate.ErrUnavailable.
func (is *Admin) DeleteRoom(ctx context.Context, room string) (RoomConfig, error) {
	c, err := is.Room(ctx, room)
	if err != nil {
		return RoomConfig{}, err
	}
	c.State, c.CloseReason = RoomClosed, ""
	return is.setRoom(ctx, room, c, true)
}

// RoomPatch is a partial RoomConfig for UpdateRoom: a nil field keeps the
// room's current value (or the default, for a room UpdateRoom creates).
// Unlike a RoomConfig given to SetRoom, a field that is set is taken as is:
// a zero or negative number is refused, never read as "the default".
type RoomPatch struct {
	Capacity        *int
	RatePerMinute   *int
	SessionDuration *time.Duration
	Tick            *time.Duration
	TickBatch       *int
	State           *RoomState
	// ArrivalWindow sets the arrival window; zero turns it off (unlike
	// RoomConfig, where zero is the default).
	ArrivalWindow *time.Duration
	// Opens and Closes set the event window; a zero time removes the bound.
	Opens, Closes *time.Time
	// PreQueue sets the pre-queue order (fifo or shuffle).
	PreQueue *PreQueue
	// PageTitle, PageMessage, BrandColor, PageLanguage, PageDoneURL and
	// PageDoneText set the page's branding; "" clears one.
	PageTitle, PageMessage, BrandColor, PageLanguage, PageDoneURL, PageDoneText *string
	// PageLogo, PageFavicon and PageStylesheet set the page's assets; ""
	// the deployment's.
	PageLogo, PageFavicon, PageStylesheet, PageTemplate *string
	// PageLanguages sets the page's languages; empty: every one.
	PageLanguages *[]string
	// PageImageOrigins sets the origins the page may show images from.
	PageImageOrigins *[]string
	// Retention sets how long the room's keys live after it ends; zero:
	// the issuer's default (as in RoomConfig).
	Retention *time.Duration
}

// apply returns c with p's fields set, or a flashgate.CodeInvalidInput
// error for a field that would silently mean "default".
func (p RoomPatch) apply(c RoomConfig) (RoomConfig, error) {
	for _, f := range []struct {
		name string
		set  bool
		v    int64
	}{
		{"capacity", p.Capacity != nil, derefInt(p.Capacity)},
		{"rate_per_minute", p.RatePerMinute != nil, derefInt(p.RatePerMinute)},
		{"session", p.SessionDuration != nil, int64(derefDuration(p.SessionDuration))},
		{"tick", p.Tick != nil, int64(derefDuration(p.Tick))},
		{"batch", p.TickBatch != nil, derefInt(p.TickBatch)},
	} {
		if f.set && f.v <= 0 {
			return RoomConfig{}, flashgate.Errorf(flashgate.CodeInvalidInput, "%s must be positive", f.name)
		}
	}
	if p.ArrivalWindow != nil && *p.ArrivalWindow < 0 {
		return RoomConfig{}, flashgate.Errorf(flashgate.CodeInvalidInput, "arrival_window must be 0 (off) or positive")
	}
	if p.State != nil && *p.State == "" {
		return RoomConfig{}, flashgate.Errorf(flashgate.CodeInvalidInput, "state must be open, paused or closed")
	}
	if p.PreQueue != nil && *p.PreQueue == "" {
		return RoomConfig{}, flashgate.Errorf(flashgate.CodeInvalidInput, "prequeue must be fifo or shuffle")
	}
	if p.PreQueue != nil {
		c.PreQueue = *p.PreQueue
	}
	if p.Capacity != nil {
		c.Capacity = *p.Capacity
	}
	if p.RatePerMinute != nil {
		c.RatePerMinute = *p.RatePerMinute
	}
	if p.SessionDuration != nil {
		c.SessionDuration = *p.SessionDuration
	}
	if p.Tick != nil {
		c.Tick = *p.Tick
	}
	if p.TickBatch != nil {
		c.TickBatch = *p.TickBatch
	}
	if p.State != nil {
		c.State = *p.State
	}
	if p.ArrivalWindow != nil {
		c.ArrivalWindow = *p.ArrivalWindow
		if c.ArrivalWindow == 0 {
			c.ArrivalWindow = ArrivalWindowOff
		}
	}
	if p.Retention != nil {
		c.Retention = *p.Retention
	}
	if p.Opens != nil {
		c.Opens = *p.Opens
	}
	if p.Closes != nil {
		c.Closes = *p.Closes
	}
	for _, f := range []struct{ v, dst *string }{
		{p.PageTitle, &c.PageTitle}, {p.PageMessage, &c.PageMessage}, {p.BrandColor, &c.BrandColor},
		{p.PageLanguage, &c.PageLanguage}, {p.PageDoneURL, &c.PageDoneURL}, {p.PageDoneText, &c.PageDoneText},
		{p.PageLogo, &c.PageLogo}, {p.PageFavicon, &c.PageFavicon}, {p.PageStylesheet, &c.PageStylesheet},
		{p.PageTemplate, &c.PageTemplate},
	} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if p.PageImageOrigins != nil {
		c.PageImageOrigins = *p.PageImageOrigins
		if len(c.PageImageOrigins) == 0 {
			c.PageImageOrigins = nil
		}
	}
	if p.PageLanguages != nil {
		c.PageLanguages = *p.PageLanguages
		if len(c.PageLanguages) == 0 {
			c.PageLanguages = nil
		}
	}
	return c, nil
}

func derefInt(p *int) int64 {
	if p == nil {
		return 0
	}
	return int64(*p)
}

func derefDuration(p *time.Duration) time.Duration {
	if p == nil {
		return 0
	}
	return *p
}

// UpdateRoom merges patch into room's stored configuration and stores the
// result (SetRoom): fields patch leaves nil keep their values. A room that
// does not exist yet is created from the defaults with patch applied, and
// created reports it. The merged configuration is checked as a whole
// (RoomConfig.Validate: capacity and rate 1…10,000,000, session whole
// seconds up to MaxSessionDuration, tick 100 ms … 1 min, batch 1…10,000,
// arrival window off or 1 s … 15 min, the window's order, the page's branding). Errors: flashgate.ErrInvalidInput (naming the field),
// flashgate.ErrUnavailable, flashgate.ErrStoreFull.
func (is *Admin) UpdateRoom(ctx context.Context, room string, patch RoomPatch) (cfg RoomConfig, created bool, err error) {
	cur, err := is.Room(ctx, room)
	created = errors.Is(err, flashgate.ErrUnknownRoom)
	if err != nil && !created {
		return RoomConfig{}, false, err
	}
	if created {
		cur = RoomConfig{}.WithDefaults()
	}
	if cur, err = patch.apply(cur); err != nil {
		return RoomConfig{}, false, err
	}
	if patch.State != nil {
		cur.CloseReason = "" // a close through the config: ReasonClosed
	}
	if cfg, err = is.SetRoom(ctx, room, cur); err != nil {
		return RoomConfig{}, false, err
	}
	return cfg, created, nil
}

// preQueueOf reads the config hash's prequeue field (absent: a room from
// before the setting, fifo).
func preQueueOf(s string) PreQueue {
	if s == "" {
		return PreQueueFIFO
	}
	return PreQueue(s)
}

// Room returns room's configuration. Errors: flashgate.ErrInvalidInput,
// flashgate.ErrUnknownRoom, flashgate.ErrUnavailable.
func (is *core) Room(ctx context.Context, room string) (RoomConfig, error) {
	if err := checkRoom(room); err != nil {
		return RoomConfig{}, err
	}
	m, err := is.cfg.Redis.HGetAll(ctx, roomKeys(room)[0]).Result()
	if err != nil {
		return RoomConfig{}, unavailable(err)
	}
	if len(m) == 0 {
		return RoomConfig{}, flashgate.Errorf(flashgate.CodeUnknownRoom, "unknown waiting room %q", room)
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(m[k]); return n }
	c := RoomConfig{
		Capacity: atoi("capacity"), RatePerMinute: atoi("rate"),
		SessionDuration: time.Duration(atoi("session_ms")) * time.Millisecond,
		Tick:            time.Duration(atoi("tick_ms")) * time.Millisecond,
		TickBatch:       atoi("batch"), State: RoomState(m["state"]),
		Opens: windowTime(int64(atoi("opens_ms"))), Closes: windowTime(int64(atoi("closes_ms"))),
		ArrivalWindow: arrivalWindow(int64(atoi("arrival_ms"))), PreQueue: preQueueOf(m["prequeue"]),
		Retention:   time.Duration(atoi("retention_ms")) * time.Millisecond,
		CloseReason: m["close_reason"], EndedAt: windowTime(int64(atoi("ended_ms"))),
		DeletedAt: windowTime(int64(atoi("deleted_ms"))), Auto: m["auto"] == "1",
	}
	for _, f := range c.pageFields() {
		setPageValue(f[1], m[f[0].(string)])
	}
	if c.State == RoomClosed && c.EndedAt.IsZero() && c.CloseReason == "" {
		c.CloseReason = ReasonClosed // closed, its end not recorded yet (a restored room)
	}
	is.remember(room, c)
	return c, nil
}

// SetState opens, pauses or closes an existing room (closing: Close with
// ReasonClosed).
func (is *Admin) SetState(ctx context.Context, room string, s RoomState) (RoomConfig, error) {
	if s == RoomClosed {
		return is.Close(ctx, room, ReasonClosed)
	}
	c, err := is.Room(ctx, room)
	if err != nil {
		return RoomConfig{}, err
	}
	c.State = s
	return is.SetRoom(ctx, room, c)
}

// Rooms lists the registered rooms, sorted.
func (is *core) Rooms(ctx context.Context) ([]string, error) {
	rooms, err := is.cfg.Redis.SMembers(ctx, keyRooms).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable(err)
	}
	slices.Sort(rooms)
	return rooms, nil
}

// pageArgs are the configure script's field, value pairs of c's page fields.
func pageArgs(c *RoomConfig) []any {
	var args []any
	for _, f := range c.pageFields() {
		args = append(args, f[0], pageValue(f[1]))
	}
	return args
}
