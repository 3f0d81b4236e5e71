package issuer

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
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
func (is *Ticker) Tick(ctx context.Context, room string) (TickResult, error) {
	if err := checkRoom(room); err != nil {
		return TickResult{}, err
	}
	var res TickResult
	var t store.Tick
	for {
		var err error
		t, err = is.db.Tick(ctx, room, is.createArg(createsByTick, room), store.TickArgs{Max: MaxTickPerCall,
			Admitted: res.Admitted, Expired: res.Expired, RetentionMs: is.cfg.RoomRetention.Milliseconds(),
			AutoIdleMs: is.autoIdleMs()})
		if err != nil {
			return res, err
		}
		cfg := tickConfig(t)
		if err := is.noteTick(ctx, room, cfg, t.Created); err != nil {
			return res, err
		}
		admitted, expired := t.Admitted, t.Expired
		res.Admitted += admitted
		res.Expired += expired
		res.NotClaimed += t.NotClaimed
		res.Placed += t.Placed
		res.ClosedOut += t.ClosedOut
		res.PriorityAdmitted += t.PriorityAdmitted
		res.Active, res.Waiting = t.Active, t.Waiting
		res.Tick = cfg.Tick
		res.Ended, res.Deleted, res.Auto = !cfg.EndedAt.IsZero(), !cfg.DeletedAt.IsZero(), cfg.Auto
		// A call that did less than its bound found nothing more to do (or
		// reached the batch, capacity or rate): the step is complete.
		if admitted < MaxTickPerCall && expired < MaxTickPerCall && t.Placed < MaxTickPerCall {
			break
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	// A closed line: drain it, DrainPerCall entries a call.
	res.Draining = t.Drain
	for calls := 0; res.Draining > 0 && calls < MaxDrainCallsPerTick; calls++ {
		d, err := is.db.Drain(ctx, room, DrainPerCall, is.cfg.RoomRetention.Milliseconds())
		if err != nil {
			return res, err
		}
		removed, left := d.Removed, d.Left
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
	if t.Config.PreQueue == string(PreQueueShuffle) && is.revealLottery(ctx, room, is.now()) {
		return is.tickAgain(ctx, room, res) // lottery_reveal.go: the seed is out, place the line in this step
	}
	return res, nil
}

// autoIdleMs is Config.AutoRoomIdle in ms for the tick script (0: never).
func (is *Ticker) autoIdleMs() int64 {
	if is.cfg.AutoRoomIdle <= 0 {
		return 0
	}
	return is.cfg.AutoRoomIdle.Milliseconds()
}

// The end of a sale (docs/rooms.md#the-end-of-a-sale): closing a room — Close,
// SoldOut, DeleteRoom, or its event window passing — ends its line at once
// (every waiting entry reads CLOSED from the room's state, lua/prelude.lua
// closed_line), the tick drains the line in bounded script calls (drain.lua,
// DrainPerCall entries each), and the room's keys expire a retention after
// the end. Run ticks rooms with nothing to do slowly (Config.IdleTickMax).

// DrainPerCall is the most waiting entries one drain script call removes
// from a closed line (ZREMRANGEBYRANK of a bounded count): small enough that
// no drain call takes longer than an enter batch of DefaultEnterBatch users
// (docs/performance.md#measurements, TestSoldOutDrainIsBounded), so Redis serves other
// clients between the calls of a million-entry drain.
const DrainPerCall = 128

// MaxDrainCallsPerTick bounds the drain calls of one Tick (so a Tick of a
// million-entry closed line returns, and other rooms are ticked, while the
// line drains over several ticks).
const MaxDrainCallsPerTick = 200

// idleRoom is a room Run ticks slowly: Enter sets on to false and sends the
// room to Run (wake).
type idleRoom struct {
	room string
	on   atomic.Bool
}

// setIdle records whether Run ticks room slowly.
func (is *Ticker) setIdle(room string, idle bool) {
	v, ok := is.idle.Load(room)
	if !ok {
		if !idle {
			return
		}
		v, _ = is.idle.LoadOrStore(strings.Clone(room), &idleRoom{room: strings.Clone(room)})
	}
	v.(*idleRoom).on.Store(idle)
}

// busy reports whether a room has work for its next tick: someone waiting,
// an admission live, a line to drain, or anything done by this tick.
func (r TickResult) busy() bool {
	return r.Waiting > 0 || r.Active > 0 || r.Draining > 0 || r.Admitted > 0 || r.Expired > 0 || r.ClosedOut > 0
}

// nextTick is how long Run waits before it ticks a room again after res, and
// the room's idle period to remember (0: not idle). A busy room is ticked at
// its configured tick; an idle one at twice its previous idle period (at
// first twice the tick), up to maxIdle (<= 0: never slower than the tick).
func nextTick(res TickResult, prevIdle, maxIdle time.Duration) (wait, idle time.Duration) {
	if res.busy() || maxIdle <= 0 || res.Tick <= 0 {
		return res.Tick, 0
	}
	idle = 2 * res.Tick
	if prevIdle > 0 {
		idle = 2 * prevIdle
	}
	idle = min(idle, max(maxIdle, res.Tick))
	return idle, idle
}

// Run ticks every registered room until ctx ends, then returns ctx.Err(): a
// room with work (someone waiting, an admission live, a closed line to
// drain) at its configured tick, a room with nothing to do ever more slowly
// up to Config.IdleTickMax (10 s) — an enter through this Issuer wakes it at
// once — and a room whose keys are gone (expired after its end) not at all:
// it leaves fg:rooms. A deleted room leaves fg:rooms once its line is
// drained, and an auto room's slot is freed when it is deleted. Run it in every replica: the limits live in Redis,
// so correctness does not depend on how many run. Errors of one tick are
// logged (rate-limited) and retried at the next; the queue store's outages
// and refusals (flashgate.ErrUnavailable, flashgate.ErrStoreFull) only when they start and end.
//
// Run also recovers from a Redis data loss (recovery.go): it ticks every room
// this replica knows even when fg:rooms no longer lists it, so a lost room is
// restored from its last known config at its next tick; and, with
// Config.SharedSecret, it keeps the waiting-token secret in step with Redis
// (SyncSecret every SecretSyncEvery).
func (is *Ticker) Run(ctx context.Context) error {
	const roomsEvery = 2 * time.Second
	next := map[string]time.Time{}
	var rooms []string
	var roomsAt, secretAt time.Time
	var lastErrLog, storeFailing time.Time
	logErr := func(msg string, err error, attrs ...any) {
		if c := flashgate.ErrorCode(err); c == flashgate.CodeUnavailable || c == flashgate.CodeStoreFull {
			if storeFailing.IsZero() {
				storeFailing = time.Now()
				is.log.Warn(msg+" (queue store; logged again when ticks succeed)", append(attrs, slog.Any("err", err))...)
			}
			return
		}
		if time.Since(lastErrLog) > 5*time.Second {
			lastErrLog = time.Now()
			is.log.Warn(msg, append(attrs, slog.Any("err", err))...)
		}
	}
	storeOK := func() {
		if !storeFailing.IsZero() {
			is.log.Info("tick loop: ticking again", "failed_for", time.Since(storeFailing).Round(time.Millisecond).String())
			storeFailing = time.Time{}
		}
	}
	idleFor := map[string]time.Duration{} // rooms ticked slowly: their current period
	// settle records room's next tick after res (nextTick, ±10 % jitter so
	// replicas do not tick in lock-step).
	settle := func(room string, res TickResult, now time.Time) {
		wait, idle := nextTick(res, idleFor[room], is.cfg.IdleTickMax)
		if idle > 0 {
			idleFor[room] = idle
		} else {
			delete(idleFor, room)
		}
		is.setIdle(room, idle > 0)
		next[room] = now.Add(time.Duration(float64(wait) * (0.9 + 0.2*rand.Float64())))
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now := time.Now()
		for woken := true; woken; {
			select {
			case room := <-is.wakeups:
				next[room] = now // an enter: tick it now
				delete(idleFor, room)
			default:
				woken = false
			}
		}
		if now.Sub(roomsAt) >= roomsEvery {
			r, err := is.Rooms(ctx)
			if err != nil {
				logErr("tick loop: list rooms", err)
			} else {
				rooms, roomsAt = is.withKnown(r), now
				if len(rooms) == 0 {
					storeOK() // otherwise a successful tick says so
				}
			}
		}
		if is.cfg.SharedSecret && now.Sub(secretAt) >= SecretSyncEvery {
			secretAt = now
			if err := is.SyncSecret(ctx); err != nil {
				logErr("tick loop: sync waiting secret", err)
			}
		}
		for _, room := range rooms {
			if now.Before(next[room]) {
				continue
			}
			is.ticks.Add(1)
			began := time.Now()
			res, err := is.Tick(ctx, room)
			is.observeTick(room, time.Since(began), res, err)
			if err != nil {
				if errors.Is(err, flashgate.ErrUnknownRoom) {
					// Its keys are gone (expired after its end, or lost and
					// unknown to this replica): stop ticking it. A room this
					// replica could restore never answers this (createArg).
					if err := is.cfg.Redis.SRem(ctx, keyRooms, room).Err(); err != nil {
						logErr("tick loop: unlist gone room", unavailable(err), "room", room)
					}
					is.forget(room)
					delete(idleFor, room)
					next[room] = now.Add(roomsEvery)
					continue
				}
				logErr("tick failed", err, "room", room)
				next[room] = now.Add(time.Second)
				continue
			}
			storeOK()
			settle(room, res, now)
		}
	}
}
