package issuer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/roomkey"
	"github.com/flashgate/flashgate/issuer/store"
)

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
// The global keys are named in internal/roomkey, with the room's.
const (
	keyRooms     = roomkey.Rooms
	keySecret    = roomkey.WaitingSecret
	keyReady     = roomkey.Ready
	keyAutoRooms = roomkey.AutoRooms
)

// roomKeys returns the keys of a room in the order the scripts expect
// (see lua/prelude.lua): roomkey.All, the one definition of the names.
func roomKeys(room string) []string { return roomkey.All(room) }

// activeKey is the key of a room's active ZSET (roomKeys(room)[2]).
func activeKey(room string) string { return roomkey.Key(room, roomkey.Active) }

// mintedKey is the key holding the digest of the admission token minted for
// admission jti of room (lua/minted.lua, read by lua/complete.lua).
func mintedKey(room, jti string) string { return roomkey.Minted(room, jti) }

// unavailable maps a failed Redis call (store.Unavailable).
func unavailable(err error) error { return store.Unavailable(err) }

// lostRoom maps err, a script's answer for room: under
// LostRoomsAwaitRestore, unknown_room for a room this replica knew and that
// had not ended is flashgate.ErrRoomLost (its data was lost; it awaits a
// restore), anything else is err.
func (is *core) lostRoom(err error, room string) error {
	if err == nil || is.cfg.LostRooms != LostRoomsAwaitRestore || !errors.Is(err, flashgate.ErrUnknownRoom) ||
		errors.Is(err, errRoomDeleted) || !is.knowsLive(room) {
		return err
	}
	// Not wrapping err: callers that read unknown_room of a known room as
	// "lost, recreate" (statusOrClaim, Leave) must not see it here.
	return &flashgate.Error{Code: flashgate.CodeRoomLost,
		Message: fmt.Sprintf("waiting room %q lost its data from the queue store and awaits a restore from the journal (flashgate restore); retry", room)}
}

// Ping checks that Redis answers and takes writes (readiness): one SET NX of
// a small expiring key, which Redis refuses while its used memory is over
// maxmemory, as it refuses new entries. Errors: flashgate.ErrUnavailable, flashgate.ErrStoreFull.
func (is *Queue) Ping(ctx context.Context) error {
	if err := is.cfg.Redis.SetNX(ctx, keyReady, "1", time.Minute).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}

// errRoomDeleted is the cause of the flashgate.ErrUnknownRoom an enter into a
// deleted room answers (store.ErrRoomDeleted).
var errRoomDeleted = store.ErrRoomDeleted

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
