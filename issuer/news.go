package issuer

import (
	"context"
	"errors"
	"time"
)

// RoomNews is one read of a room for all of its event streams on a replica
// (issue 34 §2): the room's snapshot (lua/snapshot.lua) and its
// configuration (state, page message, close reason, opening time), read with
// two Redis commands however many streams follow the room. A stream places
// its buyer from it with StatusFrom.
type RoomNews struct {
	// At is when the read started.
	At time.Time
	// State, PageMessage, CloseReason and Opens are the room's
	// configuration at At (RoomConfig's fields of those names).
	State       RoomState
	PageMessage string
	CloseReason string
	Opens       time.Time
	snap        *snapshot
	maxAge      time.Duration
}

// Changed reports whether n differs from old (nil: always) in what a waiting
// page shows at once: the room's state, page message, close reason or
// opening time.
func (n *RoomNews) Changed(old *RoomNews) bool {
	return old == nil || n.State != old.State || n.PageMessage != old.PageMessage ||
		n.CloseReason != old.CloseReason || !n.Opens.Equal(old.Opens)
}

// News reads room's news: its snapshot and its configuration, two Redis
// commands. every is how often the caller reads it: the buyers a snapshot
// that old may misplace (those a few ticks from the head) are left to the
// exact script. Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom,
// flashgate.ErrUnavailable.
func (is *Queue) News(ctx context.Context, room string, every time.Duration) (*RoomNews, error) {
	at := time.Now()
	r, err := is.db.Snapshot(ctx, room)
	if err != nil {
		return nil, err
	}
	c, err := is.Room(ctx, room)
	if err != nil {
		return nil, err
	}
	return &RoomNews{At: at, State: c.State, PageMessage: c.PageMessage, CloseReason: c.CloseReason, Opens: c.Opens,
		snap: snapshotOf(r, at), maxAge: 2 * every}, nil
}

// StatusFrom is Status answered from n where n can place the buyer (far
// enough behind the head, in n's epoch, not banned, not in a lane or the
// lottery's pre-queue), and by the exact script (one Redis call, coalesced
// with the room's others) where it cannot; exact says which. n nil: always
// the exact script. Errors: Status's.
func (is *Queue) StatusFrom(ctx context.Context, n *RoomNews, room, user, waitingToken string) (e *Entry, exact bool, err error) {
	ref, err := is.checkWaiting(room, user, waitingToken)
	if err != nil {
		if errors.Is(err, errUnknownSecret) {
			return is.notFound(room, user, waitingToken, ref.seq), false, nil
		}
		return nil, false, err
	}
	if n != nil && n.snap != nil {
		e = n.snap.place(room, user, waitingToken, ref, n.maxAge)
	}
	if e == nil {
		exact = true
		if e, err = is.exactStatus(ctx, room, user, waitingToken, ref); err != nil {
			return nil, true, err
		}
	}
	is.withReceipt(ctx, e, ref.epoch)
	return e, exact, nil
}
