package issuer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/roomkey"
	"github.com/flashgate/flashgate/issuer/store"
)

// loadScript returns the room script lua/<name>.lua preceded by the prelude
// definitions it uses (assemble).
func loadScript(name string) *redis.Script { return store.Load(name) }

// The scripts, one per operation (Lua in lua/*.lua), each declared in the Go
// file beside it (script_<name>.go: the script value, its KEYS/ARGV layout
// and its reply decoder). go-redis runs them with EVALSHA and falls back to
// EVAL on NOSCRIPT, so a SCRIPT FLUSH or a Redis restart only costs one extra
// round trip.

// loadScriptKeys is loadScript for a script that takes only the room keys
// it uses (assembleKeys): it returns them too, as indices into roomKeys.
func loadScriptKeys(name string) (*redis.Script, []int) { return store.LoadKeys(name) }

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
// touches one Cluster slot (docs/operations.md#redis-data-model).
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
	case "room_stopped":
		return flashgate.Errorf(flashgate.CodeRoomStopped, "admission issued before an operator's stop of room %q", room)
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
