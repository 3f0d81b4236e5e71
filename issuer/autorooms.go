package issuer

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
)

// Auto rooms (Config.DefaultRoom): a room an enter creates from the default
// policy holds a slot of fg:autorooms (Config.MaxAutoRooms) and is deleted
// by its tick when idle (Config.AutoRoomIdle, lua/tick.lua).

// autoRoomGrace is how old a slot of fg:autorooms must be before the sweep
// (reserveAutoRoom) may free it for a room whose config does not exist: a
// slot reserved moments ago belongs to a room being created.
const autoRoomGrace = time.Minute

// autoLimited reports whether auto rooms are limited (DefaultRoom set and
// MaxAutoRooms positive): an enter may then only create a room once its slot
// is reserved.
func (is *core) autoLimited() bool { return is.policy != "" && is.cfg.MaxAutoRooms > 0 }

// reserveAutoRoom reserves room's slot among the auto rooms (lua/autoroom.lua).
// When they are all taken it first frees the slots of auto rooms that no
// longer exist (deleted and expired, or a reservation whose enter never
// created the room, older than autoRoomGrace) and tries again.
// Errors: flashgate.ErrRoomLimit, flashgate.ErrUnavailable.
func (is *core) reserveAutoRoom(ctx context.Context, room string) error {
	try := func() (bool, error) {
		return is.db.AutoRoom(ctx, room, is.now().UnixMilli(), is.cfg.MaxAutoRooms)
	}
	ok, err := try()
	if err != nil || ok {
		return err
	}
	if is.sweepAutoRooms(ctx) > 0 {
		if ok, err = try(); err != nil || ok {
			return err
		}
	}
	return flashgate.Errorf(flashgate.CodeRoomLimit,
		"unknown waiting room %q, and no more rooms may be created: %d auto-created rooms exist (FLASHGATE_MAX_AUTO_ROOMS)",
		room, is.cfg.MaxAutoRooms)
}

// autoRoomAgain reports whether an enter (or an invite's) that passed policy
// as the create-room argument and failed with err is to be called again with
// the default policy: auto rooms are on (Config.DefaultRoom), the call
// passed none (auto rooms are limited, or this replica knew the room as
// ended) and the room is unknown — never created, expired after its end, or
// freed (an auto room deleted idle with nothing sold, lua/tick.lua), not a
// deleted room kept for its retention. When auto rooms are limited it first
// reserves the room's slot (reserveAutoRoom, another Cluster slot than the
// room's, so not in the script). Errors: those of reserveAutoRoom.
func (is *core) autoRoomAgain(ctx context.Context, room, policy string, err error) (bool, error) {
	if err == nil || policy != "" || is.policy == "" || !errors.Is(err, flashgate.ErrUnknownRoom) || errors.Is(err, errRoomDeleted) {
		return false, nil
	}
	if is.autoLimited() {
		if err := is.reserveAutoRoom(ctx, room); err != nil {
			return false, err
		}
	}
	return true, nil
}

// sweepAutoRooms frees the slots of fg:autorooms whose room has no config
// any more (older than autoRoomGrace) and returns how many it freed.
func (is *core) sweepAutoRooms(ctx context.Context) int {
	held, err := is.cfg.Redis.ZRangeWithScores(ctx, keyAutoRooms, 0, -1).Result()
	if err != nil {
		return 0
	}
	cutoff := is.now().Add(-autoRoomGrace).UnixMilli()
	freed := 0
	for _, z := range held {
		room, _ := z.Member.(string)
		if int64(z.Score) > cutoff || !ValidID(room) {
			continue
		}
		if n, err := is.cfg.Redis.Exists(ctx, roomKeys(room)[0]).Result(); err == nil && n == 0 {
			if is.cfg.Redis.ZRem(ctx, keyAutoRooms, room).Err() == nil {
				freed++
			}
		}
	}
	return freed
}

// freeAutoRoom frees room's slot among the auto rooms (it was deleted).
func (is *core) freeAutoRoom(ctx context.Context, room string) {
	if err := is.cfg.Redis.ZRem(ctx, keyAutoRooms, room).Err(); err != nil && !errors.Is(err, redis.Nil) {
		is.log.Warn("free auto room slot", "room", room, "err", err)
	}
}

// AutoRooms lists the rooms holding a slot among the auto rooms
// (Config.MaxAutoRooms). Errors: flashgate.ErrUnavailable.
func (is *Ticker) AutoRooms(ctx context.Context) ([]string, error) {
	held, err := is.cfg.Redis.ZRangeWithScores(ctx, keyAutoRooms, 0, -1).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable(err)
	}
	out := make([]string, 0, len(held))
	for _, z := range held {
		if s, ok := z.Member.(string); ok {
			out = append(out, s)
		}
	}
	return out, nil
}
