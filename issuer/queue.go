package issuer

import (
	"bytes"
	"context"
	"errors"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

// Entry is a client's view of its place: the answer of Enter and Status.
type Entry struct {
	Room         string
	User         string
	State        flashgate.State
	WaitingToken string
	// Arrival is the entry's arrival number in its room (1, 2, …): FIFO order.
	Arrival int64
	// Position is the 1-based place in line (WAITING only); Ahead = Position − 1.
	// Both are 0 while PreQueue is set.
	Position int64
	// PreQueue: WAITING in a shuffle room's pre-queue, the place not drawn
	// yet (RoomConfig.PreQueue): before the room opens, and until the
	// lottery has placed everyone who entered before it. EstimatedWait is
	// −1 then.
	PreQueue bool
	// PositionEstimated is true when Position was interpolated from the
	// replica's room snapshot rather than counted (ZRANK); see snapshot.go.
	PositionEstimated bool
	Ahead             int64
	TotalWaiting      int64
	// EstimatedWait is how long until the entry is admitted, from the
	// room's measured outflow (docs/rooms.md#estimated-wait, etaFigures.estimate):
	// at least Position at the configured pace (rate per minute, batch per
	// tick); when capacity is the limit, the time until enough slots free at
	// the pace slots freed (completions, expiries, leaves) over the last
	// minute, with little history leaning on a prior (a slot held half a
	// session), and never later than the live admissions' expiries allow.
	// A pre-queue entry (place not drawn) reads −1. While the room is
	// paused before its opening time (the event window, OpensAt), the time
	// until it opens plus the estimate then; −1 while it is paused by the
	// operator, or closed. Millisecond precision; 0 never means "now" for a
	// waiting entry (the head still waits for its admission step).
	EstimatedWait time.Duration
	// OpensAt is the room's opening time (RoomConfig.Opens) while it is
	// still ahead, for a countdown (WAITING only); zero once it has passed,
	// or when the room has none.
	OpensAt time.Time
	// PollAfter is when the client should ask again: half the soonest the
	// line could reach the entry, 1–30 s (10 s while paused), with ±20 %
	// jitter so waiting clients do not poll in lock-step (pollAfter).
	PollAfter time.Duration
	// AdmissionID is the jti (ACTIVE, EXPIRED; COMPLETED/REVOKED when known).
	AdmissionID string
	// AdmissionNumber is the admission order number (1, 2, …) in the room.
	AdmissionNumber int64
	AdmittedAt      time.Time
	// ExpiresAt is the admission's expiry (ACTIVE, EXPIRED), millisecond precision.
	ExpiresAt time.Time
	// EndedAt is when the entry was completed, revoked or found expired
	// (for ReasonNotClaimed: the end of the arrival window).
	EndedAt time.Time
	// BannedUntil is the end of the user's ban (REVOKED only, while the ban
	// lasts: the entry was ended by a ban or a revocation with one).
	BannedUntil time.Time
	// Reason says why an EXPIRED entry ended: ReasonNotClaimed (the
	// admission was not claimed by an exchange within the room's arrival
	// window) or ReasonSessionEnded; why a CLOSED one did: ReasonSoldOut,
	// ReasonClosed, ReasonEventEnded or ReasonDeleted; "" in every other state.
	Reason string
	// Lane is the line a WAITING entry waits in: flashgate.LanePriority
	// (entered with an invite; admitted before the public line) or
	// flashgate.LanePublic; "" in every other state.
	Lane      string
	RoomState RoomState
	// LotteryCommitment is the room's lottery commitment (LotteryCommitment:
	// SHA-256 hex) while PreQueue is set; "" otherwise, or when it could not
	// be read. Receipt is the entry's join receipt then (a compact JWS, typ
	// flashgate.ReceiptType; "" when Config.Signer does not sign receipts):
	// proof of the arrival number under that commitment, to check the drawn
	// place with once the seed is public (VerifyReceipt).
	LotteryCommitment, Receipt string
	// LotteryRandomness names the draw's randomness with the commitment
	// (RoomLottery.RandomnessName: "drand:<chain hash>" or OperatorChosen).
	LotteryRandomness string
	// Created is true when this Enter created the room from the default policy.
	Created bool
}

func (is *Issuer) entry(room, user, tok string, r scriptEntry) *Entry {
	e := &Entry{
		Room: room, User: user,
		State:        r.state,
		Arrival:      r.seq,
		Position:     r.pos,
		TotalWaiting: r.total,
		AdmissionID:  r.jti,
		Created:      r.created,
		RoomState:    r.roomState,
		PreQueue:     r.preQueue,
	}
	if e.State == flashgate.StateExpired || e.State == flashgate.StateClosed {
		e.Reason = r.reason
	}
	if e.State == flashgate.StateWaiting {
		e.Lane = r.lane
	}
	at := r.at
	if id, ok := r.admission(); ok {
		e.AdmissionNumber, e.AdmittedAt = id.Number, id.AdmittedAt
	}
	switch e.State {
	case flashgate.StateActive:
		e.ExpiresAt = time.UnixMilli(at)
	case flashgate.StateExpired, flashgate.StateCompleted, flashgate.StateRevoked:
		e.EndedAt = time.UnixMilli(at)
	case flashgate.StateClosed:
		if at > 0 { // 0: the room's end not recorded yet, or reopened since
			e.EndedAt = time.UnixMilli(at)
		}
	}
	if e.State == flashgate.StateRevoked && r.bannedUntil > 0 {
		e.BannedUntil = time.UnixMilli(r.bannedUntil)
	}
	if e.State == flashgate.StateWaiting {
		e.Ahead = max(0, e.Position-1)
		e.EstimatedWait = -1
		soonest := time.Duration(-1)
		if r.hasETA {
			if !e.PreQueue { // a place not drawn yet has no estimate, only the countdown
				e.EstimatedWait = r.eta.wait(e.RoomState, e.Position)
				soonest = r.eta.soonest(e.RoomState, e.Position)
			}
			if r.eta.opens > 0 {
				e.OpensAt = time.UnixMilli(r.eta.opens)
			}
		}
		e.PollAfter = pollAfter(soonest)
		if e.PreQueue && e.RoomState == RoomOpen {
			e.PollAfter = pollAfter(0) // opened: the places are drawn within a tick or so
		}
	}
	switch {
	case tok != "":
		e.WaitingToken = tok
	case e.Arrival > 0 && r.epoch != "":
		if s := is.secrets.Load(); s != nil {
			e.WaitingToken = s.current.token(room, user, r.epoch, e.Arrival)
		}
	}
	return e
}

// Reasons of an EXPIRED entry (Entry.Reason).
const (
	// ReasonNotClaimed: admitted, but not claimed (exchanged) within the
	// room's arrival window; the slot went to the next in line.
	ReasonNotClaimed = "not_claimed"
	// ReasonSessionEnded: the admission ran its whole session.
	ReasonSessionEnded = "session_ended"
)

// Reasons of a CLOSED entry (Entry.Reason) and of a room's end
// (RoomConfig.CloseReason): why the line the entry was in ended.
const (
	// ReasonSoldOut: the operator declared the sale sold out (SoldOut).
	ReasonSoldOut = "sold_out"
	// ReasonClosed: the operator closed the room (Close, SetState).
	ReasonClosed = "closed"
	// ReasonEventEnded: the room's event window closed (RoomConfig.Closes).
	ReasonEventEnded = "event_ended"
	// ReasonDeleted: the room was deleted (DeleteRoom, or idle as an auto room).
	ReasonDeleted = "deleted"
)

// pollAfter chooses the next poll from soonest, the earliest the line could
// reach the entry (etaFigures.soonest; −1: unknown): half of it, clamped to
// 1 s … 30 s (10 s when unknown, e.g. paused), times a uniform jitter in
// [0.8, 1.2). Not from the estimate: a capacity-bound room's estimate waits
// for slots to free, but a completion can free one at any moment, and an
// admitted buyer who has not looked yet holds a slot for nothing.
func pollAfter(soonest time.Duration) time.Duration {
	base := 10 * time.Second
	if soonest >= 0 {
		base = min(max(soonest/2, time.Second), 30*time.Second)
	}
	return time.Duration(float64(base) * (0.8 + 0.4*mrand.Float64())).Round(time.Millisecond)
}

func (is *Issuer) needSecret() error {
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
func (is *Issuer) Enter(ctx context.Context, room, user string) (*Entry, error) {
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
func (is *Issuer) entered(ctx context.Context, room, user string, r scriptEntry) (*Entry, error) {
	if r.state == "" && r.bannedUntil > 0 {
		return nil, bannedError(room, r.bannedUntil)
	}
	e := is.entry(room, user, "", r)
	is.withReceipt(ctx, e, r.epoch)
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

// Status reports the entry behind a waiting token: WAITING (position, ahead,
// estimate, poll hint), ACTIVE (expiry), EXPIRED, COMPLETED, REVOKED, CLOSED
// (the room closed while the entry waited: Reason says why, EndedAt when) or
// NOT_FOUND (left, or superseded by a newer entry). Users far behind the head
// are answered from the replica's room snapshot (PositionEstimated; a token
// whose owner left may then still read WAITING until the line reaches it).
// Status keeps a copy of room as the key of the replica's snapshot; the
// returned Entry holds the caller's strings.
//
// Errors: flashgate.ErrInvalidInput, flashgate.ErrBadWaiting (not a waiting token),
// flashgate.ErrOwnerMismatch (another user's token), flashgate.ErrUnknownRoom, flashgate.ErrUnavailable.
func (is *Issuer) Status(ctx context.Context, room, user, waitingToken string) (*Entry, error) {
	ref, err := is.checkWaiting(room, user, waitingToken)
	if err != nil {
		if errors.Is(err, errUnknownSecret) {
			return is.notFound(room, user, waitingToken, ref.seq), nil
		}
		return nil, err
	}
	e := is.fromSnapshot(ctx, room, user, waitingToken, ref)
	if e == nil {
		if e, err = is.exactStatus(ctx, room, user, waitingToken, ref); err != nil {
			return nil, err
		}
	}
	is.withReceipt(ctx, e, ref.epoch)
	return e, nil
}

// notFound is the NOT_FOUND entry, as the status script reports it: what a
// waiting token whose entry (arrival seq) is gone — left, superseded, or lost
// with Redis's data — reads; the client enters again.
func (is *Issuer) notFound(room, user, tok string, seq int64) *Entry {
	return &Entry{Room: room, User: user, State: flashgate.StateNotFound, WaitingToken: tok, Arrival: seq}
}

// exactStatus runs the status script for a verified waiting token. A room
// lost with Redis's data that this replica knew reads NOT_FOUND (the entry is
// gone; the client's next enter restores the room), not flashgate.ErrUnknownRoom.
func (is *Issuer) exactStatus(ctx context.Context, room, user, tok string, ref waitingRef) (*Entry, error) {
	return is.statusOrClaim(ctx, room, user, tok, ref, false)
}

// statusItem is one token in a status script call: the token's user,
// arrival seq and epoch, and whether to claim its admission (Exchange).
type statusItem struct {
	user  string
	seq   int64
	epoch string
	claim bool
}

// statusOrClaim runs the status script for one token, coalesced with the
// room's concurrent statuses and exchanges (batch.go; EnterBatch 1: a call
// of its own); claim also claims an ACTIVE admission within its arrival
// window (Exchange), in the same script.
func (is *Issuer) statusOrClaim(ctx context.Context, room, user, tok string, ref waitingRef, claim bool) (*Entry, error) {
	r, err := is.statusBatch(room).call(ctx, statusItem{user: user, seq: ref.seq, epoch: ref.epoch, claim: claim},
		func(it statusItem) statusItem {
			it.user, it.epoch = strings.Clone(it.user), strings.Clone(it.epoch)
			return it
		})
	if err != nil {
		if errors.Is(err, flashgate.ErrUnknownRoom) && is.knows(room) {
			return is.notFound(room, user, tok, ref.seq), nil
		}
		return nil, err
	}
	return is.entry(room, user, tok, r), nil
}

// statusItems runs the status script for items, in that order (one call),
// and decodes its reply (store.Gateway.Status, statusEntries); it counts the call in
// ScriptBatchStats (Status for the plain items, Exchange for the claims).
// Errors: the script's whole-call errors (flashgate.ErrUnknownRoom, or
// flashgate.ErrRoomLost as lostRoom maps it), flashgate.ErrUnavailable.
func (is *Issuer) statusItems(ctx context.Context, room string, items []statusItem) ([]outcome[scriptEntry], error) {
	args := make([]store.StatusItem, 0, len(items))
	epoch := ""
	if len(items) > 0 {
		epoch = items[0].epoch
	}
	var mask []byte // ARGV[4]: 'c' at byte k when token k claims ("": none does)
	claims := 0
	for k, it := range items {
		ref := strconv.FormatInt(it.seq, 10)
		if it.claim {
			if mask == nil {
				mask = bytes.Repeat([]byte{'-'}, len(items))
			}
			mask[k] = 'c'
			claims++
		}
		if it.epoch != epoch {
			ref += "/" + it.epoch
		}
		args = append(args, store.StatusItem{User: it.user, Ref: ref})
	}
	if claims < len(items) {
		is.batchStats.status.add(len(items) - claims)
	}
	if claims > 0 {
		is.batchStats.exchange.add(claims)
	}
	r, err := is.db.Status(ctx, room, epoch, string(mask), args)
	if err != nil {
		return nil, err
	}
	return statusEntries(r), nil
}

func (is *Issuer) checkWaiting(room, user, tok string) (waitingRef, error) {
	if err := checkRoom(room); err != nil {
		return waitingRef{}, err
	}
	if err := checkUser(user); err != nil {
		return waitingRef{}, err
	}
	if err := is.needSecret(); err != nil {
		return waitingRef{}, err
	}
	return is.secrets.Load().parse(room, user, tok)
}

// Leave removes the waiting entry, or ends the live admission, behind a
// waiting token, and the user index. Errors as Status, plus flashgate.ErrNotFound when
// there is nothing to leave (a repeated leave).
func (is *Issuer) Leave(ctx context.Context, room, user, waitingToken string) error {
	ref, err := is.checkWaiting(room, user, waitingToken)
	if err != nil {
		return err
	}
	left, err := is.db.Leave(ctx, room, user, ref.seq, ref.epoch)
	if errors.Is(err, flashgate.ErrUnknownRoom) && is.knows(room) {
		return flashgate.Errorf(flashgate.CodeNotFound, "no live entry to leave: room %q lost its data", room)
	}
	if err != nil {
		return err
	}
	if !left {
		return flashgate.Errorf(flashgate.CodeNotFound, "no live entry to leave")
	}
	return nil
}
