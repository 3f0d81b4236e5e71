package issuer

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/roomkey"
)

//go:embed lua/*.lua
var luaFS embed.FS

// prelude is lua/prelude.lua cut into its definitions (splitPrelude).
var prelude = splitPrelude(mustRead("lua/prelude.lua"))

// loadScript returns the room script lua/<name>.lua preceded by the prelude
// definitions it uses (assemble).
func loadScript(name string) *redis.Script {
	return redis.NewScript(assemble(prelude, mustRead("lua/"+name+".lua")))
}

// The scripts, one per operation (Lua in lua/*.lua). go-redis runs them with
// EVALSHA and falls back to EVAL on NOSCRIPT, so a SCRIPT FLUSH or a Redis
// restart only costs one extra round trip.
var (
	enterScript     = loadScript("enter")
	statusScript    = loadScript("status")
	leaveScript     = loadScript("leave")
	completeScript  = loadScript("complete")
	activeScript    = loadScript("active")
	revokeScript    = loadScript("revoke")
	tickScript      = loadScript("tick")
	statsScript     = loadScript("stats")
	snapshotScript  = loadScript("snapshot")
	banScript       = loadScript("ban")
	unbanScript     = loadScript("unban")
	bansScript      = loadScript("bans")
	configureScript = loadScript("configure")
	drainScript     = loadScript("drain")
	// autoRoomScript is not a room's: its one key is fg:autorooms.
	autoRoomScript = redis.NewScript(mustRead("lua/autoroom.lua"))
	inviteScript   = loadScript("invite")
	auditScript    = loadScript("audit")
	restoreScript  = loadScript("restore")
	// mintedScript is not a room's either: its keys are the minted keys
	// (mintedKey) of the tokens it notes.
	mintedScript = redis.NewScript(mustRead("lua/minted.lua"))
)

func mustRead(name string) string {
	b, err := luaFS.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Redis lists just the commands flashgate uses, so *redis.Client,
// *redis.ClusterClient, *redis.Ring and the Sentinel-backed failover client
// all satisfy it (go-redis/redis_rate style).
type Redis interface {
	redis.Scripter
	Ping(ctx context.Context) *redis.StatusCmd
	HSet(ctx context.Context, key string, values ...any) *redis.IntCmd
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	SAdd(ctx context.Context, key string, members ...any) *redis.IntCmd
	SMembers(ctx context.Context, key string) *redis.StringSliceCmd
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Get(ctx context.Context, key string) *redis.StringCmd
	ZScore(ctx context.Context, key, member string) *redis.FloatCmd
	SRem(ctx context.Context, key string, members ...any) *redis.IntCmd
	ZRem(ctx context.Context, key string, members ...any) *redis.IntCmd
	ZRangeWithScores(ctx context.Context, key string, start, stop int64) *redis.ZSliceCmd
	Exists(ctx context.Context, keys ...string) *redis.IntCmd
}

// Key names. Every key of a room carries the hash tag {room}, so each script
// touches one Cluster slot (README "Redis data model").
const (
	keyRooms  = "fg:rooms"          // SET of room ids, read by the tick loop and the admin API
	keySecret = "fg:waiting-secret" // shared HMAC key for waiting tokens (when not configured)
	keyReady  = "fg:ready"          // written by Ping (readiness: does Redis take writes?), expires
	// keyAutoRooms is a ZSET of the auto rooms holding a slot (room → when
	// it was reserved, ms): Config.MaxAutoRooms, across replicas.
	keyAutoRooms = "fg:autorooms"
)

// roomKeys returns the keys of a room in the order the scripts expect
// (see lua/prelude.lua): roomkey.All, the one definition of the names.
func roomKeys(room string) []string { return roomkey.All(room) }

// activeKey is the key of a room's active ZSET (roomKeys(room)[2]).
func activeKey(room string) string { return roomkey.Key(room, roomkey.Active) }

// mintedKey is the key holding the digest of the admission token minted for
// admission jti of room (lua/minted.lua, read by lua/complete.lua).
func mintedKey(room, jti string) string { return roomkey.Minted(room, jti) }

// unavailable maps a failed Redis call: an OOM refusal (used memory over
// maxmemory; Redis refuses a script whose first write would allocate, and
// deny-oom commands) to flashgate.ErrStoreFull, a script's RESTORING
// refusal (the room is mid-restore) to flashgate.ErrRoomLost, anything else
// to flashgate.ErrUnavailable.
func unavailable(err error) error {
	if redis.HasErrorPrefix(err, "RESTORING") { // lua/prelude.lua load_config: restore.lua is mid-way
		return &flashgate.Error{Code: flashgate.CodeRoomLost, Message: "waiting room being restored from the journal; retry"}
	}
	if redis.HasErrorPrefix(err, "OOM") {
		return &flashgate.Error{Code: flashgate.CodeStoreFull, Message: "queue store full (Redis maxmemory): no new entries until memory is freed", Err: err}
	}
	return &flashgate.Error{Code: flashgate.CodeUnavailable, Message: "queue store unavailable", Err: err}
}

func (is *Issuer) nowArg() string {
	if is.cfg.Now == nil {
		return ""
	}
	return strconv.FormatInt(is.cfg.Now().UnixMilli(), 10)
}

// run executes a script for room and returns its reply, mapping
// {'ERROR', code} replies to domain errors and Redis failures to flashgate.ErrUnavailable.
func (is *Issuer) run(ctx context.Context, s *redis.Script, room string, args ...any) ([]any, error) {
	return is.runPolicy(ctx, s, room, is.createArg(s, room), args...)
}

// runPolicy is run with policy as the create-room argument (ARGV[2]).
func (is *Issuer) runPolicy(ctx context.Context, s *redis.Script, room, policy string, args ...any) ([]any, error) {
	return is.runKeys(ctx, s, room, roomKeys(room), policy, args...)
}

// runKeys is runPolicy with keys given: the room's (roomKeys), then any
// the script takes beyond them (complete.lua's minted keys).
func (is *Issuer) runKeys(ctx context.Context, s *redis.Script, room string, keys []string, policy string, args ...any) ([]any, error) {
	argv := append([]any{is.nowArg(), policy}, args...)
	res, err := s.Run(ctx, is.cfg.Redis, keys, argv...).Slice()
	res, err = reply(res, err, room)
	return res, is.lostRoom(err, room)
}

// lostRoom maps err, a script's answer for room: under
// LostRoomsAwaitRestore, unknown_room for a room this replica knew and that
// had not ended is flashgate.ErrRoomLost (its data was lost; it awaits a
// restore), anything else is err.
func (is *Issuer) lostRoom(err error, room string) error {
	if err == nil || is.cfg.LostRooms != LostRoomsAwaitRestore || !errors.Is(err, flashgate.ErrUnknownRoom) ||
		errors.Is(err, errRoomDeleted) || !is.knowsLive(room) {
		return err
	}
	// Not wrapping err: callers that read unknown_room of a known room as
	// "lost, recreate" (statusOrClaim, Leave) must not see it here.
	return &flashgate.Error{Code: flashgate.CodeRoomLost,
		Message: fmt.Sprintf("waiting room %q lost its data from the queue store and awaits a restore from the journal (flashgate restore); retry", room)}
}

// reply maps a script's reply: Redis failures to flashgate.ErrUnavailable,
// {'ERROR', code} to the code's domain error.
func reply(res []any, err error, room string) ([]any, error) {
	if err != nil {
		return nil, unavailable(err)
	}
	if len(res) == 2 && res[0] == "ERROR" {
		code, _ := res[1].(string)
		return nil, scriptError(code, room)
	}
	return res, nil
}

// runReplicated is run followed, on the same connection, by WAIT for
// CompletionReplicas replicas (when configured).
func (is *Issuer) runReplicated(ctx context.Context, s *redis.Script, room string, args ...any) ([]any, error) {
	return is.runReplicatedKeys(ctx, s, room, roomKeys(room), args...)
}

// runReplicatedKeys is runReplicated with keys given (runKeys).
func (is *Issuer) runReplicatedKeys(ctx context.Context, s *redis.Script, room string, keys []string, args ...any) ([]any, error) {
	n := is.cfg.CompletionReplicas
	if n <= 0 {
		return is.runKeys(ctx, s, room, keys, is.createArg(s, room), args...)
	}
	argv := append([]any{is.nowArg(), is.createArg(s, room)}, args...)
	// exec pipelines the script (EVALSHA, or EVAL after NOSCRIPT) and WAIT,
	// since WAIT only counts the writes of its own connection.
	exec := func(eval func(redis.Scripter) *redis.Cmd) ([]any, int64, error) {
		p := is.cfg.Redis.(pipeliner).Pipeline()
		c := eval(p)
		w := p.Do(ctx, "WAIT", n, is.cfg.CompletionTimeout.Milliseconds())
		_, _ = p.Exec(ctx)
		res, err := c.Slice()
		if err != nil {
			return nil, 0, err
		}
		acks, err := w.Int64()
		return res, acks, err
	}
	res, acks, err := exec(func(p redis.Scripter) *redis.Cmd { return s.EvalSha(ctx, p, keys, argv...) })
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		res, acks, err = exec(func(p redis.Scripter) *redis.Cmd { return s.Eval(ctx, p, keys, argv...) })
	}
	if res, err = reply(res, err, room); err != nil {
		return nil, is.lostRoom(err, room)
	}
	if acks < int64(n) {
		return nil, &flashgate.Error{Code: flashgate.CodeUnavailable, Message: fmt.Sprintf(
			"write acknowledged by %d of %d replicas within %s; retry (a retry returns the first result)",
			acks, n, is.cfg.CompletionTimeout)}
	}
	return res, nil
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// at returns r[i], or nil past r's end.
func at(r []any, i int) any {
	if i < len(r) {
		return r[i]
	}
	return nil
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// replyReader reads a script's positional reply element by element: a
// reply too short, or an element of another type than asked for, is an
// error naming the script and the element (flashgate.CodeInternal, from
// err), never a panic or a silent zero. An absent element (Lua false: a
// Redis nil) reads as 0 or "".
type replyReader struct {
	script string
	r      []any
	i      int
	err    error
}

func newReplyReader(script string, r []any) *replyReader { return &replyReader{script: script, r: r} }

func (c *replyReader) fail(what string) {
	if c.err == nil {
		c.err = flashgate.Errorf(flashgate.CodeInternal, "%s script: malformed reply (element %d: %s): %v", c.script, c.i+1, what, c.r)
	}
}

func (c *replyReader) next() (any, bool) {
	if c.err != nil {
		return nil, false
	}
	if c.i >= len(c.r) {
		c.fail("missing")
		return nil, false
	}
	c.i++
	return c.r[c.i-1], true
}

// int64 reads an integer (a Lua number, or a string of one).
func (c *replyReader) int64() int64 {
	v, ok := c.next()
	if !ok {
		return 0
	}
	switch x := v.(type) {
	case int64:
		return x
	case nil:
		return 0
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil || x == "" {
			return n
		}
	}
	c.i--
	c.fail(fmt.Sprintf("want an integer, got %T", v))
	return 0
}

// int reads an integer as an int.
func (c *replyReader) int() int { return int(c.int64()) }

// string reads a string.
func (c *replyReader) string() string {
	v, ok := c.next()
	if !ok {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	c.i--
	c.fail(fmt.Sprintf("want a string, got %T", v))
	return ""
}

// list reads a nested array.
func (c *replyReader) list() []any {
	v, ok := c.next()
	if !ok {
		return nil
	}
	l, isList := v.([]any)
	if !isList && v != nil {
		c.i--
		c.fail(fmt.Sprintf("want an array, got %T", v))
	}
	return l
}

// more reports whether elements are left (an optional tail).
func (c *replyReader) more() bool { return c.err == nil && c.i < len(c.r) }

// entry builds an Entry from a script result; tok is the caller's verified

// Ping checks that Redis answers and takes writes (readiness): one SET NX of
// a small expiring key, which Redis refuses while its used memory is over
// maxmemory, as it refuses new entries. Errors: flashgate.ErrUnavailable, flashgate.ErrStoreFull.
func (is *Issuer) Ping(ctx context.Context) error {
	if err := is.cfg.Redis.SetNX(ctx, keyReady, "1", time.Minute).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}

// errRoomDeleted is the cause of the flashgate.ErrUnknownRoom an enter into a
// deleted room answers (its keys not expired yet): no auto room slot is
// reserved for it.
var errRoomDeleted = errors.New("room deleted")

// scriptError maps the codes scripts return as {'ERROR', code}.
func scriptError(code, room string) error {
	switch code {
	case "unknown_room":
		return flashgate.Errorf(flashgate.CodeUnknownRoom, "unknown waiting room %q", room)
	case "room_deleted":
		return &flashgate.Error{Code: flashgate.CodeUnknownRoom, Err: errRoomDeleted,
			Message: fmt.Sprintf("unknown waiting room %q: it was deleted", room)}
	case "room_closed":
		return flashgate.Errorf(flashgate.CodeRoomClosed, "waiting room %q is closed", room)
	case "not_found":
		return flashgate.Errorf(flashgate.CodeNotFound, "admission not found in room %q", room)
	case "stale":
		return flashgate.Errorf(flashgate.CodeNotFound, "admission from an earlier epoch of room %q: it was lost when the queue store lost its data; queue again", room)
	case "expired":
		return flashgate.Errorf(flashgate.CodeExpired, "admission expired")
	case "revoked":
		return flashgate.Errorf(flashgate.CodeRevoked, "admission revoked")
	case "completed":
		return flashgate.Errorf(flashgate.CodeCompleted, "admission already completed")
	case "owner_mismatch":
		return flashgate.Errorf(flashgate.CodeOwnerMismatch, "admission belongs to another user")
	case "not_minted":
		return ErrNotMinted
	case "invite_used":
		return flashgate.Errorf(flashgate.CodeInviteUsed, "the invite was already used (it is single use)")
	case "invite_expired":
		return flashgate.Errorf(flashgate.CodeInviteExpired, "the invite has expired")
	case "room_not_empty":
		return flashgate.Errorf(flashgate.CodeRoomNotEmpty, "room %q has entries in the queue store: restore refuses to write over them", room)
	case "not_restoring":
		return flashgate.Errorf(flashgate.CodeInternal, "room %q is not being restored (its restore was not begun, or begun from another epoch)", room)
	}
	return flashgate.Errorf(flashgate.CodeInternal, "unexpected script result %q", code)
}

// Typed replies. Every script answers a positional array; each one is
// decoded here, next to the others, by a function that names the Lua reply
// shape it reads. A reply {'ERROR', code} never reaches a decoder (reply).

// scriptEntry is one entry as the enter and status scripts report it.
type scriptEntry struct {
	state           flashgate.State
	seq, pos, total int64  // arrival number, 1-based position (WAITING), users waiting
	jti             string // the admission id; admission returns what it names
	at              int64  // ms: expiry (ACTIVE, EXPIRED) or end time (COMPLETED, REVOKED)
	created         bool   // the enter call created the room from the default policy
	rate            int64  // the room's new users per minute
	roomState       RoomState
	epoch           string // the room's epoch (enter; status leaves it "": the token carries it)
	bannedUntil     int64  // ms: the end of the user's ban (enter: refused; status: REVOKED), 0 for none
	reason          string // why an EXPIRED entry ended ("not_claimed", "session_ended"), or a CLOSED one (status)
	preQueue        bool   // WAITING in a shuffle room's pre-queue, place not drawn yet (the scripts' position 0)
	lane            string // WAITING: flashgate.LanePriority or flashgate.LanePublic
	eta             etaFigures
	hasETA          bool // eta was read (WAITING in a room not closed)
}

// admission decodes e.jti with the one codec of admission ids,
// flashgate.ParseAdmissionID: the admission number and time. ok is false
// when the entry has no admission id.
func (e scriptEntry) admission() (id flashgate.AdmissionID, ok bool) {
	if e.jti == "" {
		return flashgate.AdmissionID{}, false
	}
	return flashgate.ParseAdmissionID(e.jti)
}

// decodeStatusBatch decodes the status script's reply for n tokens
// (lua/status.lua), one flat list: {total_waiting, rate, room_state, eta
// figures (decodeFigures; {} when nobody in the call waits, or the room is
// closed), then per token, in order, "WAITING", seq, position, lane,
// expiry_ms, or state, seq, jti, at_ms, banned_until_ms, reason (every other
// state)}; position 0 of a WAITING entry: in the pre-queue (preQueue). A
// reply of any other shape is a flashgate.CodeInternal error.
func decodeStatusBatch(r []any, n int) ([]outcome[scriptEntry], error) {
	bad := func() ([]outcome[scriptEntry], error) {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "status script: malformed reply for %d tokens: %v", n, r)
	}
	if len(r) < 4 {
		return bad()
	}
	head := scriptEntry{total: asInt(r[0]), rate: asInt(r[1]), roomState: RoomState(asString(r[2]))}
	if head.roomState == "" {
		return bad()
	}
	eta, hasETA := decodeFigures(r[3], head.rate)
	out := make([]outcome[scriptEntry], 0, n)
	for i := 4; i < len(r); {
		if i+2 > len(r) {
			return bad()
		}
		e := head
		e.state, e.seq = flashgate.State(asString(r[i])), asInt(r[i+1])
		switch {
		case e.state == flashgate.StateWaiting:
			if i+5 > len(r) {
				return bad()
			}
			e.pos, e.lane = asInt(r[i+2]), asString(r[i+3])
			e.preQueue = e.pos == 0
			if hasETA {
				e.eta, e.hasETA = eta.forPosition(e.pos, asInt(r[i+4])), true
			}
			i += 5
		case e.state != "":
			if i+6 > len(r) {
				return bad()
			}
			e.jti, e.at, e.bannedUntil, e.reason = asString(r[i+2]), asInt(r[i+3]), asInt(r[i+4]), asString(r[i+5])
			i += 6
		default:
			return bad()
		}
		out = append(out, outcome[scriptEntry]{res: e})
	}
	if len(out) != n {
		return bad()
	}
	return out, nil
}

// decodeEnter decodes the enter script's reply for n users (lua/enter.lua):
// {created, rate, room_state, epoch, eta figures (decodeFigures; {} when
// nobody in the batch waits), then per user 1, seq, position,
// total_waiting, expiry_ms (WAITING, public line; position 0: in the
// pre-queue; expiry: the position's eta_expiry), 4, the same (WAITING,
// priority lane; also lua/invite.lua's), 2, seq, total_waiting, jti,
// expiry_ms (ACTIVE) or 3, banned_until_ms (refused: a scriptEntry with
// bannedUntil and no state)}.
// A reply of any other shape is a flashgate.CodeInternal error.
func decodeEnter(r []any, n int) ([]scriptEntry, error) {
	bad := func() ([]scriptEntry, error) {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "enter script: malformed reply for %d users: %v", n, r)
	}
	if len(r) < 5 || !flashgate.ValidEpoch(asString(r[3])) {
		return bad()
	}
	head := scriptEntry{created: asInt(r[0]) == 1, rate: asInt(r[1]), roomState: RoomState(asString(r[2])),
		epoch: asString(r[3])}
	eta, hasETA := decodeFigures(r[4], head.rate)
	out := make([]scriptEntry, 0, n)
	for i := 5; i < len(r); {
		e := head
		switch tag := asInt(r[i]); tag {
		case 1, 4:
			if i+5 > len(r) || !hasETA {
				return bad()
			}
			e.state, e.seq, e.pos, e.total = flashgate.StateWaiting, asInt(r[i+1]), asInt(r[i+2]), asInt(r[i+3])
			e.preQueue = e.pos == 0
			e.lane = flashgate.LanePublic
			if tag == 4 {
				e.lane = flashgate.LanePriority
			}
			e.eta, e.hasETA = eta.forPosition(e.pos, asInt(r[i+4])), true
			i += 5
		case 2:
			if i+5 > len(r) {
				return bad()
			}
			e.state, e.seq, e.total, e.jti, e.at = flashgate.StateActive, asInt(r[i+1]), asInt(r[i+2]), asString(r[i+3]), asInt(r[i+4])
			i += 5
		case 3:
			if i+2 > len(r) || asInt(r[i+1]) <= 0 {
				return bad()
			}
			e.bannedUntil = asInt(r[i+1])
			i += 2
		default:
			return bad()
		}
		out = append(out, e)
		head.created = false // only the first user's result reports the room's creation
	}
	if len(out) != n {
		return bad()
	}
	return out, nil
}

// decodeLeave decodes the leave script's reply (lua/leave.lua): {'LEFT'}
// or {'NOT_FOUND'}; true when the entry was left.
func decodeLeave(r []any) (bool, error) {
	c := newReplyReader("leave", r)
	left := c.string() == "LEFT"
	return left, c.err
}

// completeReply is one admission's reply of the complete script
// (lua/complete.lua): {'COMPLETED', at_ms, repeated}.
type completeReply struct {
	at       time.Time // when the admission was completed (the first time)
	repeated bool
}

// decodeComplete decodes the complete script's reply for n (user, jti)
// pairs (lua/complete.lua): one reply per pair, in order, {'COMPLETED',
// at_ms, repeated} or {'ERROR', code} (that pair's error alone: scriptError
// for room). A reply of any other shape is a flashgate.CodeInternal error.
func decodeComplete(r []any, n int, room string) ([]outcome[completeReply], error) {
	if len(r) != n {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "complete script: malformed reply for %d admissions: %v", n, r)
	}
	out := make([]outcome[completeReply], n)
	for i, x := range r {
		v, _ := x.([]any)
		switch {
		case len(v) == 3 && v[0] == "COMPLETED":
			out[i].res = completeReply{at: time.UnixMilli(asInt(v[1])), repeated: asInt(v[2]) == 1}
		case len(v) == 2 && v[0] == "ERROR":
			out[i].err = scriptError(asString(v[1]), room)
		default:
			return nil, flashgate.Errorf(flashgate.CodeInternal, "complete script: malformed reply for admission %d: %v", i+1, x)
		}
	}
	return out, nil
}

// revokeReply is the revoke script's reply (lua/revoke.lua):
// {'REVOKED', at_ms, repeated, jti, banned_until_ms}.
type revokeReply struct {
	at          time.Time // when the admission was revoked (the first time)
	repeated    bool
	jti         string
	bannedUntil int64 // ms, 0: no ban
}

func decodeRevoke(r []any) (revokeReply, error) {
	c := newReplyReader("revoke", r)
	c.string()
	v := revokeReply{at: time.UnixMilli(c.int64()), repeated: c.int64() == 1, jti: c.string()}
	if c.more() {
		v.bannedUntil = c.int64()
	}
	return v, c.err
}

// decodeBan decodes the ban script's reply (lua/ban.lua): {'BANNED',
// banned_until_ms, removed, revoked jti or ”, now_ms}.
func decodeBan(user string, r []any) (*Ban, error) {
	c := newReplyReader("ban", r)
	c.string()
	b := &Ban{User: user, Until: time.UnixMilli(c.int64()), RemovedWaiting: c.int64() == 1, RevokedAdmission: c.string()}
	b.BannedAt = time.UnixMilli(c.int64())
	return b, c.err
}

// decodeBans decodes the bans script's reply (lua/bans.lua): {total, then
// per ban user, banned_until_ms, "<banned_ms>:<reason>"}.
func decodeBans(r []any) (total int64, bans []Ban) {
	if len(r) == 0 {
		return 0, nil
	}
	total = asInt(r[0])
	for i := 1; i+2 < len(r); i += 3 {
		b := Ban{User: asString(r[i]), Until: time.UnixMilli(asInt(r[i+1]))}
		at, reason, _ := strings.Cut(asString(r[i+2]), ":")
		if ms, err := strconv.ParseInt(at, 10, 64); err == nil {
			b.BannedAt = time.UnixMilli(ms)
		}
		b.Reason = reason
		bans = append(bans, b)
	}
	return total, bans
}

// activeReply is the active script's verdict (lua/active.lua):
// {'ACTIVE', expiry_ms}, {'EXPIRED', expiry_ms} or {'GONE'}.
type activeReply string

const (
	activeLive    activeReply = "ACTIVE"
	activeExpired activeReply = "EXPIRED"
	activeGone    activeReply = "GONE"
)

func decodeActive(r []any) (activeReply, error) {
	c := newReplyReader("active", r)
	v := activeReply(c.string())
	return v, c.err
}

// tickReply is one tick script call's reply (lua/tick.lua):
// {admitted, expired, active, waiting, tick_ms, created, then the room's
// config as configured: state, capacity, rate, session_ms, batch, opens_ms,
// closes_ms, arrival_ms, then not_claimed, drawn, prequeue, then drain,
// ended_ms, deleted_ms, auto, close_reason, retention_ms, closed_out, then
// priority_admitted}.
type tickReply struct {
	admitted, expired int  // this call's admissions and expiries
	notClaimed        int  // of the expiries, those not claimed within the arrival window
	placed            int  // pre-queue entries this call moved to their lottery place
	priorityAdmitted  int  // of the admissions, those from the priority lane
	active, waiting   int  // after the call
	created           bool // the call restored the room from the replica's last known config
	drain             int  // waiting entries of a closed line, for drain.lua (0: none)
	closedOut         int  // entries of a closed line the call dropped from the head instead of admitting
	cfg               RoomConfig
}

// decodeTick decodes a tick reply; one of any other shape is a
// flashgate.CodeInternal error.
func decodeTick(r []any) (tickReply, error) {
	if len(r) < 24 {
		return tickReply{}, flashgate.Errorf(flashgate.CodeInternal, "tick script: malformed reply %v", r)
	}
	return tickReply{admitted: int(asInt(r[0])), expired: int(asInt(r[1])),
		active: int(asInt(r[2])), waiting: int(asInt(r[3])), created: asInt(r[5]) == 1,
		notClaimed: int(asInt(r[14])), placed: int(asInt(r[15])),
		drain: int(asInt(r[17])), closedOut: int(asInt(r[23])), priorityAdmitted: int(asInt(at(r, 24))),
		cfg: RoomConfig{State: RoomState(asString(r[6])), Capacity: int(asInt(r[7])),
			RatePerMinute: int(asInt(r[8])), SessionDuration: time.Duration(asInt(r[9])) * time.Millisecond,
			TickBatch: int(asInt(r[10])), Tick: time.Duration(asInt(r[4])) * time.Millisecond,
			Opens: windowTime(asInt(r[11])), Closes: windowTime(asInt(r[12])),
			ArrivalWindow: arrivalWindow(asInt(r[13])), PreQueue: preQueueOf(asString(r[16])),
			EndedAt: windowTime(asInt(r[18])), DeletedAt: windowTime(asInt(r[19])), Auto: asString(r[20]) == "1",
			CloseReason: asString(r[21]), Retention: time.Duration(asInt(r[22])) * time.Millisecond}}, nil
}

// decodeDrain decodes the drain script's reply (lua/drain.lua): {removed, left}.
func decodeDrain(r []any) (removed, left int, err error) {
	c := newReplyReader("drain", r)
	removed, left = c.int(), c.int()
	return removed, left, c.err
}

// setRoomReply is the configure script's reply (lua/configure.lua): {state
// in effect, ended_ms, close_reason, deleted_ms, waiting}.
type setRoomReply struct {
	state       RoomState
	ended       time.Time
	closeReason string
	deleted     time.Time
	waiting     int64
}

func decodeSetRoom(r []any) (setRoomReply, error) {
	c := newReplyReader("configure", r)
	v := setRoomReply{state: RoomState(c.string()), ended: windowTime(c.int64()),
		closeReason: c.string(), deleted: windowTime(c.int64()), waiting: c.int64()}
	return v, c.err
}

// decodeStats decodes the stats script's reply (lua/stats.lua): {'OK',
// waiting, active, configured state, capacity, rate, session_ms, batch,
// tick_ms, stats HGETALL flat list, now_ms, entries ever created, state in
// effect, opens_ms, closes_ms, epoch, arrival_ms, prequeue, then the lottery:
// cutoff (−1: not drawn), bits, lottery_ms, lottery_done_ms, seed (” before
// the draw), commitment (” without a seed), then the end: closed_seq,
// close_reason, ended_ms, deleted_ms, auto, retention_ms, then priority}:
// Waiting counts both lanes, Priority the priority lane.
func decodeStats(room string, r []any) *Stats {
	st := &Stats{Room: room, Waiting: asInt(r[1]), Active: asInt(r[2]),
		Config: RoomConfig{State: RoomState(asString(r[3])), Capacity: int(asInt(r[4])),
			RatePerMinute: int(asInt(r[5])), SessionDuration: time.Duration(asInt(r[6])) * time.Millisecond,
			TickBatch: int(asInt(r[7])), Tick: time.Duration(asInt(r[8])) * time.Millisecond,
			Opens: windowTime(asInt(r[13])), Closes: windowTime(asInt(r[14])),
			ArrivalWindow: arrivalWindow(asInt(r[16])), PreQueue: preQueueOf(asString(r[17]))},
		At: time.UnixMilli(asInt(r[10])), Entered: asInt(r[11]), State: RoomState(asString(r[12])),
		Epoch: asString(r[15]), Priority: asInt(at(r, 30))}
	st.Waiting += st.Priority
	if len(r) > 29 {
		st.ClosedSeq = asInt(r[24])
		st.Config.CloseReason, st.Config.EndedAt = asString(r[25]), windowTime(asInt(r[26]))
		st.Config.DeletedAt, st.Config.Auto = windowTime(asInt(r[27])), asString(r[28]) == "1"
		st.Config.Retention = time.Duration(asInt(r[29])) * time.Millisecond
	}
	kv, _ := r[9].([]any)
	fields := map[string]*int64{"admitted": &st.Admitted, "fast_track": &st.FastTrack,
		"expired": &st.Expired, "not_claimed": &st.NotClaimed, "completed": &st.Completed, "revoked": &st.Revoked,
		"left": &st.Left, "zombies": &st.Zombies, "peak_active": &st.PeakActive,
		"banned": &st.Banned, "removed": &st.Removed, "closed_out": &st.ClosedOut,
		"priority_admitted": &st.PriorityAdmitted, "bypassed": &st.Bypassed, "invites_used": &st.InvitesUsed}
	var placed int64
	fields["drawn"] = &placed
	for i := 0; i+1 < len(kv); i += 2 {
		if p, ok := fields[asString(kv[i])]; ok {
			*p = asInt(kv[i+1])
		}
	}
	if cutoff, commitment := asInt(r[18]), asString(r[23]); cutoff >= 0 || commitment != "" {
		l := &Lottery{Commitment: commitment, Placed: placed}
		if cutoff >= 0 {
			l.Drawn, l.Cutoff, l.Bits, l.Seed = true, cutoff, int(asInt(r[19])), asString(r[22])
			l.DrawnAt, l.PlacedAt = windowTime(asInt(r[20])), windowTime(asInt(r[21]))
		}
		st.Lottery = l
	}
	return st
}

// decodeSnapshot decodes the snapshot script's reply (lua/snapshot.lua):
// {waiting, head_seq, tail_seq, room_state, rate, capacity, tick_ms, epoch,
// banned users, exact_through, before, closed_seq, close reason, ended_ms,
// priority lane length, the smallest and largest lane seq, the lane seqs,
// eta figures (decodeFigures), sampled expiries {j, expiry_ms, …}}; at is
// when the call was sent.
func decodeSnapshot(r []any, at time.Time) *snapshot {
	s := &snapshot{at: at, waiting: asInt(r[0]), head: asInt(r[1]), tail: asInt(r[2]),
		state: RoomState(asString(r[3])), rate: asInt(r[4]), capacity: asInt(r[5]),
		tick: time.Duration(asInt(r[6])) * time.Millisecond, epoch: asString(r[7])}
	if len(r) > 8 {
		if users, _ := r[8].([]any); len(users) > 0 {
			s.banned = make(map[string]struct{}, len(users))
			for _, u := range users {
				s.banned[asString(u)] = struct{}{}
			}
		}
	}
	if len(r) > 10 {
		s.exactThrough, s.before = asInt(r[9]), asInt(r[10])
	}
	if len(r) > 13 {
		s.closedSeq, s.closeReason, s.ended = asInt(r[11]), asString(r[12]), asInt(r[13])
	}
	if len(r) > 17 {
		s.priority, s.laneMin, s.laneMax = asInt(r[14]), asInt(r[15]), asInt(r[16])
		if seqs, _ := r[17].([]any); len(seqs) > 0 {
			s.laneSeqs = make(map[int64]struct{}, len(seqs))
			for _, q := range seqs {
				s.laneSeqs[asInt(q)] = struct{}{}
			}
		}
	}
	if len(r) > 19 {
		s.eta, s.hasETA = decodeFigures(r[18], s.rate)
		sample, _ := r[19].([]any)
		s.eta.sample = make([]rankedExpiry, 0, len(sample)/2)
		for i := 0; i+1 < len(sample); i += 2 {
			s.eta.sample = append(s.eta.sample, rankedExpiry{j: asInt(sample[i]), at: asInt(sample[i+1])})
		}
	}
	return s
}
