package issuer

// The enter path, Queue.Enter from the call to the answer: the ids, the
// room's enter coalescer (enterBatch; the group commit itself is batch.go's)
// and its send (enterUsers: the create-room argument, the enter script's one
// Go call store.Gateway.Enter, its reply as the issuer's entries), then the
// Entry (entry.go), the wake of an idle room and the room's registration
// with the tick loops (docs/architecture.md#walk-of-one-enter).

import (
	"context"
	"strings"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

func (is *Queue) needSecret() error {
	if is.secrets.Load() == nil {
		return flashgate.Errorf(flashgate.CodeInternal, "issuer: Config.WaitingSecret is not set")
	}
	return nil
}

// Enter puts user in room's line, or returns the entry the user already has
// (WAITING or ACTIVE) — idempotent, so refreshes and retries never create a
// second place (invariant 1). When nobody waits and capacity and rate allow,
// the user is admitted at once (fast track).
//
// Enter keeps copies of room (the room's enter batcher, the registered
// rooms) and, while user waits for an enter script call, of user; the
// returned Entry holds the caller's strings.
//
// Errors: flashgate.ErrInvalidInput (ids), flashgate.ErrUnknownRoom, flashgate.ErrRoomClosed,
// flashgate.ErrBanned (a *BannedError with the ban's end; see Ban), flashgate.ErrUnavailable,
// flashgate.ErrStoreFull (Redis is over maxmemory and refuses the new entry).
func (is *Queue) Enter(ctx context.Context, room, user string) (*Entry, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if err := checkUser(user); err != nil {
		return nil, err
	}
	if err := is.needSecret(); err != nil {
		return nil, err
	}
	r, err := is.enterBatch(room).call(ctx, user, strings.Clone)
	if err != nil {
		return nil, err
	}
	return is.entered(ctx, room, user, *r)
}

// entered turns an enter script's result for user into the Entry (or the
// banned refusal), and registers the room with the tick loops.
func (is *Queue) entered(ctx context.Context, room, user string, r scriptEntry) (*Entry, error) {
	if r.state == "" && r.bannedUntil > 0 {
		return nil, bannedError(room, r.bannedUntil)
	}
	e := is.entry(room, user, "", r)
	if e.PreQueue { // a lottery room's pre-queue entry: its signed receipt (receipt.go)
		is.withReceipt(ctx, e, r.epoch)
	}
	is.wake(room)
	if e.Created {
		if err := is.noteCreated(ctx, room); err != nil {
			return nil, err
		}
		is.journalCommitment(ctx, room) // a shuffle room (default, or one recovered from its known config) has a new seed
	}
	// Register the room with the tick loops (fg:rooms; another slot, so not in
	// the script). Not only when this call created it: a retried first enter
	// answers created=0, and the room would then never be ticked. Once per
	// process per room, and again whenever a script (re)creates it.
	if _, known := is.registered.Load(room); e.Created || !known {
		if err := is.cfg.Redis.SAdd(ctx, keyRooms, room).Err(); err != nil {
			return nil, unavailable(err)
		}
		is.registered.Store(strings.Clone(room), struct{}{}) // kept: a copy (invariant 7)
	}
	return e, nil
}

// enterBatch returns room's enter coalescer: its results point into its
// batch's decoded reply.
func (is *Queue) enterBatch(room string) *coalescer[string, *scriptEntry] {
	return batchOf(&is.enterBatchers, room, is.cfg.ScriptBatch, func(room string) func(context.Context, []string) ([]outcome[*scriptEntry], error) {
		return func(ctx context.Context, users []string) ([]outcome[*scriptEntry], error) {
			args := make([]any, len(users))
			for i, u := range users {
				args[i] = u
			}
			rs, err := is.enterUsers(ctx, room, args...)
			if err != nil {
				return nil, err
			}
			// Each caller's result points into the decoded reply, not a copy of it.
			out := make([]outcome[*scriptEntry], len(rs))
			for i := range rs {
				out[i].res = &rs[i]
			}
			return out, nil
		}
	})
}

// enterUsers runs the enter script for users, in that order, and decodes
// its reply (store.Gateway.Enter, enterEntries).
//
// With limited auto rooms (Config.MaxAutoRooms) an unknown room is created
// only once its slot is reserved: the first call may not create it
// (createArg), and on unknown_room the slot is reserved (autoRoomAgain)
// and the call repeated with the default policy. Errors: those of the script, and
// flashgate.ErrRoomLimit.
func (is *Queue) enterUsers(ctx context.Context, room string, users ...any) ([]scriptEntry, error) {
	ids := make([]string, len(users))
	for i, u := range users {
		ids[i], _ = u.(string)
	}
	is.batchStats.enter.add(len(users))
	policy := is.createArg(createsByEnter, room)
	r, err := is.db.Enter(ctx, room, policy, ids)
	if err != nil { // an unknown room may be an auto room to create (autorooms.go)
		if again, rerr := is.autoRoomAgain(ctx, room, policy, err); rerr != nil {
			return nil, rerr
		} else if again {
			is.batchStats.enter.add(len(users))
			r, err = is.db.Enter(ctx, room, is.defaultPolicy(), ids)
		}
	}
	if err != nil {
		return nil, err
	}
	return enterEntries(r), nil
}

// enterEntries returns the entries of an enter (or invite) reply, one per
// user in order: only the first reports the room's creation.
func enterEntries(r store.Enter) []scriptEntry {
	head := scriptEntry{created: r.Created, rate: r.Rate, roomState: RoomState(r.RoomState), epoch: r.Epoch}
	eta, hasETA := figuresOf(r.ETA, r.Rate)
	out := make([]scriptEntry, 0, len(r.Users))
	for _, u := range r.Users {
		e := head
		switch u.Kind {
		case store.EnterWaiting, store.EnterPriority:
			e.state, e.seq, e.pos, e.total = flashgate.StateWaiting, u.Seq, u.Pos, u.Total
			e.preQueue = e.pos == 0
			e.lane = flashgate.LanePublic
			if u.Kind == store.EnterPriority {
				e.lane = flashgate.LanePriority
			}
			if hasETA {
				e.eta, e.hasETA = eta.forPosition(e.pos, u.ExpiryMs), true
			}
		case store.EnterActive:
			e.state, e.seq, e.total, e.jti, e.at = flashgate.StateActive, u.Seq, u.Total, u.JTI, u.ExpiryMs
		case store.EnterBanned:
			e.bannedUntil = u.BannedUntilMs
		}
		out = append(out, e)
		head.created = false
	}
	return out
}

// wake tells Run to tick room at once if it is ticking it slowly (an enter
// through this Issuer: there may be work now). Cheap when it is not: one
// sync.Map lookup.
func (is *core) wake(room string) {
	v, ok := is.idle.Load(room)
	if !ok {
		return
	}
	r := v.(*idleRoom)
	if r.on.CompareAndSwap(true, false) {
		select {
		case is.wakeups <- r.room:
		default: // Run is behind: it ticks the room at its slow period
		}
	}
}
