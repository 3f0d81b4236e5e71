package issuer

import (
	"context"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/internal/roomkey"
)

// keyDirectives is the HASH of edge directives: field = room, value = the
// room's not_before in Unix seconds (Stop). It is not a room's key (no hash
// tag): on Redis Cluster it lives in its own slot, so the document of every
// room is one HGETALL, and Stop writes it in a second command after the
// room's own not_before (the room's config field, which completion reads
// in the room's slot).
const keyDirectives = roomkey.Directives

// StopResult is what Stop did.
type StopResult struct {
	// NotBefore is the room's not_before, whole Unix seconds: admissions
	// issued (token iat) before it are refused. It is the stop's time
	// rounded up to the next whole second, so every admission issued up to
	// the stop is refused, including those of the stop's own second.
	NotBefore time.Time
	// Paused is true when the stop paused an open room.
	Paused bool
	// Config is the room's config after the stop.
	Config RoomConfig
}

// Stop refuses every admission of room issued up to now: it pauses the room
// when it is open (a stopped sale admits nobody until an operator opens it
// again; a paused or closed room keeps its state), then moves the room's
// not_before to the next whole second by the queue's clock (Redis TIME, or
// Config.Now) — never backwards. Completion refuses those admissions at once
// (flashgate.CodeRoomStopped: the complete script reads the room's
// not_before); edge verifiers refuse their tokens (reason room_stopped)
// once they fetch the directive document (Directives; docs/rooms.md "Stopping a
// sale at the edge"). Stopped admissions keep their place in the room's
// capacity until they expire or are revoked.
//
// Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom,
// flashgate.ErrUnavailable. On ErrUnavailable the stop may be half done
// (paused, or refused at completion but not yet at the edge): call it again.
func (is *Admin) Stop(ctx context.Context, room string) (StopResult, error) {
	c, err := is.Room(ctx, room)
	if err != nil {
		return StopResult{}, err
	}
	var res StopResult
	if c.State == RoomOpen {
		if c, err = is.SetState(ctx, room, RoomPaused); err != nil {
			return StopResult{}, err
		}
		res.Paused = true
	}
	nb, err := is.db.Stop(ctx, room)
	if err != nil {
		return StopResult{}, err
	}
	v := strconv.FormatInt(nb, 10)
	if err := is.cfg.Redis.HSet(ctx, keyDirectives, room, v).Err(); err != nil {
		return StopResult{}, unavailable(err)
	}
	res.NotBefore, res.Config = time.Unix(nb, 0).UTC(), c
	return res, nil
}

// Directives returns every room's not_before (Unix seconds) that a Stop has
// set: the content of the edge directive document. Errors:
// flashgate.ErrUnavailable.
func (is *Queue) Directives(ctx context.Context) (map[string]int64, error) {
	m, err := is.cfg.Redis.HGetAll(ctx, keyDirectives).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	out := make(map[string]int64, len(m))
	for room, v := range m {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			out[room] = n
		}
	}
	return out, nil
}
