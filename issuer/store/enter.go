package store

import (
	"context"
	"fmt"

	"github.com/flashgate/flashgate"
)

// Enter is lua/enter.lua's (and lua/invite.lua's) reply for a batch of
// users: {created, rate, room_state, epoch, eta figures, then per user
// 1, seq, position, total_waiting, expiry_ms (WAITING, public line;
// position 0: in the pre-queue; expiry: the position's eta_expiry), 4, the
// same (WAITING, priority lane), 2, seq, total_waiting, jti, expiry_ms
// (ACTIVE) or 3, banned_until_ms (refused)}.
type Enter struct {
	Created   bool  // the call created the room (from the create policy)
	Rate      int64 // the room's new users per minute
	RoomState string
	Epoch     string
	ETA       Figures // OK whenever a user of the batch waits
	Users     []EnterUser
}

// EnterKind is a user's outcome in an Enter reply (its tag).
type EnterKind int64

const (
	EnterWaiting  EnterKind = 1 // WAITING in the public line
	EnterActive   EnterKind = 2 // ACTIVE (admitted at once, or already)
	EnterBanned   EnterKind = 3 // refused: banned until BannedUntilMs
	EnterPriority EnterKind = 4 // WAITING in the priority lane
)

// EnterUser is one user's outcome in an Enter reply.
type EnterUser struct {
	Kind          EnterKind
	Seq, Pos      int64 // arrival number; position (WAITING; 0: in the pre-queue)
	Total         int64 // users waiting
	ExpiryMs      int64 // WAITING: the position's eta_expiry; ACTIVE: the admission's expiry
	JTI           string
	BannedUntilMs int64
}

// Enter runs lua/enter.lua for users, in arrival order (one call per
// batch), with policy the create-room argument (lua/prelude.lua ARGV[2]:
// "" creates no room). KEYS: the room's; ARGV: now, policy, the users.
func (g *Gateway) Enter(ctx context.Context, room, policy string, users []string) (Enter, error) {
	args := make([]any, len(users))
	for i, u := range users {
		args[i] = u
	}
	r, err := g.run(ctx, enterScript, room, roomKeysOf{room}.keys(), policy, args...)
	if err != nil {
		return Enter{}, err
	}
	return decodeEnter("enter", r, len(users))
}

// InviteArgs are lua/invite.lua's arguments: the user, the lane, the
// single-use invite's id ("" for a reusable one) and the invite's expiry
// (ms).
type InviteArgs struct {
	User, Lane, Once string
	ExpiresMs        int64
}

// Invite runs lua/invite.lua: an enter with an invite, into its lane.
// KEYS: the room's; ARGV: now, policy, user, lane, once, expiry. Reply:
// Enter's, for one user.
func (g *Gateway) Invite(ctx context.Context, room, policy string, a InviteArgs) (Enter, error) {
	r, err := g.run(ctx, inviteScript, room, roomKeysOf{room}.keys(), policy, a.User, a.Lane, a.Once, a.ExpiresMs)
	if err != nil {
		return Enter{}, err
	}
	return decodeEnter("invite", r, 1)
}

func decodeEnter(script string, r []any, n int) (Enter, error) {
	c := newReader(script, r)
	v := Enter{Created: c.flag("created"), Rate: c.int("rate"), RoomState: c.str("room_state"), Epoch: c.str("epoch")}
	if c.Err() == nil && !flashgate.ValidEpoch(v.Epoch) {
		c.bad("epoch", fmt.Sprintf("not an epoch: %q", v.Epoch))
	}
	v.ETA = c.figures("eta")
	v.Users = make([]EnterUser, 0, n)
	for c.more() {
		u := EnterUser{Kind: EnterKind(c.int("tag"))}
		switch u.Kind {
		case EnterWaiting, EnterPriority:
			u.Seq, u.Pos, u.Total, u.ExpiryMs = c.int("seq"), c.int("position"), c.int("total_waiting"), c.int("expiry_ms")
			if !v.ETA.OK {
				c.bad("expiry_ms", "a WAITING user without the eta figures")
			}
		case EnterActive:
			u.Seq, u.Total, u.JTI, u.ExpiryMs = c.int("seq"), c.int("total_waiting"), c.str("jti"), c.int("expiry_ms")
		case EnterBanned:
			if u.BannedUntilMs = c.int("banned_until_ms"); u.BannedUntilMs <= 0 {
				c.bad("banned_until_ms", "a refusal without a ban")
			}
		default:
			c.bad("tag", fmt.Sprintf("unknown tag %d", u.Kind))
		}
		v.Users = append(v.Users, u)
	}
	if c.Err() == nil && len(v.Users) != n {
		c.bad("users", fmt.Sprintf("%d users answered, %d sent", len(v.Users), n))
	}
	if c.Err() != nil {
		return Enter{}, c.Err()
	}
	return v, nil
}
