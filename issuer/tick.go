package issuer

import (
	"context"
	"time"
)

// MaxTickPerCall is the most admissions, and the most lapsed-admission
// expiries, one tick script call performs. A script call blocks Redis while
// it runs (about 10 µs per admitted user: 1,000 users ≈ 10 ms, README
// "Measurements"), so Tick runs a room's batch in calls of at most this many.
const MaxTickPerCall = 1000

// TickResult is what one admission step (one Tick, however many script
// calls it took) did.
type TickResult struct {
	Admitted int // moved from waiting to active, all calls together
	Expired  int // lapsed admissions dropped, all calls together
	// NotClaimed counts the expired admissions (part of Expired) that ended
	// early, not claimed within the arrival window.
	NotClaimed int
	// Placed counts the pre-queue entries moved to their lottery place
	// (RoomConfig.PreQueue shuffle; nobody is admitted until all are).
	Placed  int
	Active  int           // live admissions after the step
	Waiting int           // entries still waiting after the step
	Tick    time.Duration // the room's configured tick
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
func (is *Issuer) Tick(ctx context.Context, room string) (TickResult, error) {
	if err := checkRoom(room); err != nil {
		return TickResult{}, err
	}
	var res TickResult
	for {
		r, err := is.run(ctx, tickScript, room, MaxTickPerCall, res.Admitted, res.Expired)
		if err != nil {
			return res, err
		}
		t, err := decodeTick(r)
		if err != nil {
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
		res.Active, res.Waiting = t.active, t.waiting
		res.Tick = t.cfg.Tick
		// A call that did less than its bound found nothing more to do (or
		// reached the batch, capacity or rate): the step is complete.
		if admitted < MaxTickPerCall && expired < MaxTickPerCall && t.placed < MaxTickPerCall {
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
}
