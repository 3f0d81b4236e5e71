package issuer

import (
	"context"
	"time"
)

// MaxTickPerCall is the most admissions, and the most lapsed-admission
// expiries, one tick script call performs. A script call blocks Redis while
// it runs (about 10 µs per admitted user: 1,000 users ≈ 10 ms, docs/performance.md
// "Measurements"), so Tick runs a room's batch in calls of at most this many.
const MaxTickPerCall = 1000

// TickResult is what one admission step (one Tick, however many script
// calls it took) did.
type TickResult struct {
	Admitted int // moved from waiting to active, all calls together
	// PriorityAdmitted counts the admissions (part of Admitted) from the
	// priority lane, which the tick admits before the public line.
	PriorityAdmitted int
	Expired          int // lapsed admissions dropped, all calls together
	// NotClaimed counts the expired admissions (part of Expired) that ended
	// early, not claimed within the arrival window.
	NotClaimed int
	// Placed counts the pre-queue entries moved to their lottery place
	// (RoomConfig.PreQueue shuffle; nobody is admitted until all are).
	Placed  int
	Active  int           // live admissions after the step
	Waiting int           // entries still waiting after the step, both lanes
	Tick    time.Duration // the room's configured tick
	// ClosedOut counts the waiting entries of a closed line this step
	// removed (drained, or dropped from the head of a reopened room's line).
	ClosedOut int
	// Draining is how many entries of a closed line are still to drain
	// after the step (0: none): the next ticks go on.
	Draining int
	// Ended: the room is closed in effect and its end recorded (its keys
	// expire its retention after it). Deleted: it was deleted (DeleteRoom,
	// or by this step, idle as an auto room). Auto: an auto room.
	Ended, Deleted, Auto bool
}

// Tick runs one bounded admission step for room: drop lapsed admissions,
// place a drawn pre-queue (the lottery, RoomConfig.PreQueue: MaxTickPerCall
// entries per call, as many calls as it takes; nobody is admitted before it
// is done), then admit min(capacity − live, rate budget, batch) from the
// head of the line. The room's batch (up to 10,000) is worked off in script calls of at
// most MaxTickPerCall admissions and MaxTickPerCall expiries each, so no
// call blocks Redis for long; every call enforces capacity, rate and what is
// left of the batch itself, and Tick calls again only while the previous
// call used a whole bound (so a batch that is a multiple of MaxTickPerCall
// ends with a call that finds it spent). Any number of replicas may tick the
// same room concurrently. When ctx ends or a call fails after earlier calls
// of the step succeeded, Tick returns what those did along with the error.
//
// A room closed in effect admits nobody; its tick records the room's end if
// no script has yet (an event window that closed by itself), re-applies its
// keys' expiry, and drains its line: up to MaxDrainCallsPerTick drain script
// calls of at most DrainPerCall entries each (TickResult.ClosedOut, and
// Draining for what is left to the next ticks). An auto room idle for
// Config.AutoRoomIdle is deleted by its tick (TickResult.Deleted) and its
// slot freed; a deleted room leaves fg:rooms (Rooms) once drained.
func (is *Issuer) Tick(ctx context.Context, room string) (TickResult, error) {
	if err := checkRoom(room); err != nil {
		return TickResult{}, err
	}
	var res TickResult
	var t tickReply
	for {
		r, err := is.run(ctx, tickScript, room, MaxTickPerCall, res.Admitted, res.Expired,
			is.cfg.RoomRetention.Milliseconds(), is.autoIdleMs())
		if err != nil {
			return res, err
		}
		if t, err = decodeTick(r); err != nil {
			return res, err
		}
		if err := is.noteTick(ctx, room, t); err != nil {
			return res, err
		}
		admitted, expired := t.admitted, t.expired
		res.Admitted += admitted
		res.Expired += expired
		res.NotClaimed += t.notClaimed
		res.Placed += t.placed
		res.ClosedOut += t.closedOut
		res.PriorityAdmitted += t.priorityAdmitted
		res.Active, res.Waiting = t.active, t.waiting
		res.Tick = t.cfg.Tick
		res.Ended, res.Deleted, res.Auto = !t.cfg.EndedAt.IsZero(), !t.cfg.DeletedAt.IsZero(), t.cfg.Auto
		// A call that did less than its bound found nothing more to do (or
		// reached the batch, capacity or rate): the step is complete.
		if admitted < MaxTickPerCall && expired < MaxTickPerCall && t.placed < MaxTickPerCall {
			break
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	// A closed line: drain it, DrainPerCall entries a call.
	res.Draining = t.drain
	for calls := 0; res.Draining > 0 && calls < MaxDrainCallsPerTick; calls++ {
		r, err := is.run(ctx, drainScript, room, DrainPerCall, is.cfg.RoomRetention.Milliseconds())
		if err != nil {
			return res, err
		}
		removed, left, err := decodeDrain(r)
		if err != nil {
			return res, err
		}
		res.ClosedOut += removed
		res.Draining = left
		if res.Ended { // closed in effect: left is what still waits (also when a retried call removed nothing)
			res.Waiting = left
		} else {
			res.Waiting -= removed
		}
		if removed == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	if res.ClosedOut > 0 {
		is.snaps.forget(room) // the line changed under this replica's snapshot
	}
	if res.Deleted && res.Waiting == 0 && res.Draining == 0 {
		// Drained: out of the listings. Its keys expire with its retention;
		// replicas that know it keep ticking it (withKnown), which re-applies
		// the expiry to keys a late write created (a completion's record).
		if err := is.cfg.Redis.SRem(ctx, keyRooms, room).Err(); err != nil {
			return res, unavailable(err)
		}
	}
	if res.Deleted && res.Auto {
		is.freeAutoRoom(ctx, room)
	}
	return res, nil
}

// autoIdleMs is Config.AutoRoomIdle in ms for the tick script (0: never).
func (is *Issuer) autoIdleMs() int64 {
	if is.cfg.AutoRoomIdle <= 0 {
		return 0
	}
	return is.cfg.AutoRoomIdle.Milliseconds()
}
