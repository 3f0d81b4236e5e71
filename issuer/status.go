package issuer

// The calls with a waiting token: Queue.Status (exact, through the room's
// status coalescer statusBatch, which exchanges share, or from the
// replica's snapshot, snapshot.go) and Queue.Leave.

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

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
func (is *Queue) Status(ctx context.Context, room, user, waitingToken string) (*Entry, error) {
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
func (is *Queue) notFound(room, user, tok string, seq int64) *Entry {
	return &Entry{Room: room, User: user, State: flashgate.StateNotFound, WaitingToken: tok, Arrival: seq}
}

// exactStatus runs the status script for a verified waiting token. A room
// lost with Redis's data that this replica knew reads NOT_FOUND (the entry is
// gone; the client's next enter restores the room), not flashgate.ErrUnknownRoom.
func (is *Queue) exactStatus(ctx context.Context, room, user, tok string, ref waitingRef) (*Entry, error) {
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
func (is *Queue) statusOrClaim(ctx context.Context, room, user, tok string, ref waitingRef, claim bool) (*Entry, error) {
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
func (is *Queue) statusItems(ctx context.Context, room string, items []statusItem) ([]outcome[scriptEntry], error) {
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

func (is *Queue) checkWaiting(room, user, tok string) (waitingRef, error) {
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
func (is *Queue) Leave(ctx context.Context, room, user, waitingToken string) error {
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

// statusBatch returns room's status coalescer (status and exchange items).
func (is *Queue) statusBatch(room string) *coalescer[statusItem, scriptEntry] {
	return batchOf(&is.statusBatchers, room, is.cfg.ScriptBatch, func(room string) func(context.Context, []statusItem) ([]outcome[scriptEntry], error) {
		return func(ctx context.Context, items []statusItem) ([]outcome[scriptEntry], error) {
			return is.statusItems(ctx, room, items)
		}
	})
}

// statusEntries returns the entries of a status reply, one per token in order.
func statusEntries(r store.Status) []outcome[scriptEntry] {
	head := scriptEntry{total: r.Total, rate: r.Rate, roomState: RoomState(r.RoomState)}
	eta, hasETA := figuresOf(r.ETA, r.Rate)
	out := make([]outcome[scriptEntry], 0, len(r.Tokens))
	for _, t := range r.Tokens {
		e := head
		e.state, e.seq = flashgate.State(t.State), t.Seq
		if e.state == flashgate.StateWaiting {
			e.pos, e.lane = t.Pos, t.Lane
			e.preQueue = e.pos == 0
			if hasETA {
				e.eta, e.hasETA = eta.forPosition(e.pos, t.ExpiryMs), true
			}
		} else {
			e.jti, e.at, e.bannedUntil, e.reason = t.JTI, t.AtMs, t.BannedUntilMs, t.Reason
		}
		out = append(out, outcome[scriptEntry]{res: e})
	}
	return out
}
