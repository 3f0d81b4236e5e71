package store

import (
	"context"
	"fmt"
)

// Status is lua/status.lua's reply for a batch of tokens, one flat list:
// {total_waiting, rate, room_state, eta figures (empty when nobody in the
// call waits, or the room is closed), then per token, in order,
// "WAITING", seq, position, lane, expiry_ms, or state, seq, jti, at_ms,
// banned_until_ms, reason (every other state)}.
type Status struct {
	Total     int64
	Rate      int64
	RoomState string
	ETA       Figures
	Tokens    []StatusToken
}

// StatusToken is one token's entry in a Status reply.
type StatusToken struct {
	State         string // flashgate.State: WAITING, ACTIVE, EXPIRED, COMPLETED, REVOKED, CLOSED…
	Seq           int64
	Pos           int64 // WAITING: position, 0 in the pre-queue
	Lane          string
	ExpiryMs      int64 // WAITING: the position's eta_expiry
	JTI           string
	AtMs          int64 // expiry (ACTIVE, EXPIRED) or end time (COMPLETED, REVOKED)
	BannedUntilMs int64
	Reason        string
}

// StatusItem is one token of a status call: the user and ref (the arrival
// seq, followed by "/" and the token's epoch when it is not the call's).
type StatusItem struct{ User, Ref string }

// Status runs lua/status.lua: the entries behind a batch of waiting tokens
// of room, claiming (an exchange) those whose byte of claims is 'c'.
// KEYS: only the room keys status.lua binds (statusKeysOf); ARGV: now, ""
// (status creates no room), epoch (the call's: its first token's), claims
// ("" for none), then user, ref per token.
func (g *Gateway) Status(ctx context.Context, room, epoch, claims string, items []StatusItem) (Status, error) {
	args := make([]any, 0, 2+2*len(items))
	args = append(args, epoch, claims)
	for _, it := range items {
		args = append(args, it.User, it.Ref)
	}
	r, err := g.run(ctx, statusScript, room, statusKeysOf{room}.keys(), "", args...)
	if err != nil {
		return Status{}, err
	}
	return decodeStatus(r, len(items))
}

func decodeStatus(r []any, n int) (Status, error) {
	c := newReader("status", r)
	v := Status{Total: c.int("total_waiting"), Rate: c.int("rate"), RoomState: c.str("room_state")}
	if c.Err() == nil && v.RoomState == "" {
		c.bad("room_state", "empty")
	}
	v.ETA = c.figures("eta")
	v.Tokens = make([]StatusToken, 0, n)
	for c.more() {
		t := StatusToken{State: c.str("state"), Seq: c.int("seq")}
		switch {
		case t.State == "WAITING":
			t.Pos, t.Lane, t.ExpiryMs = c.int("position"), c.str("lane"), c.int("expiry_ms")
		case t.State != "":
			t.JTI, t.AtMs, t.BannedUntilMs, t.Reason = c.str("jti"), c.int("at_ms"), c.int("banned_until_ms"), c.str("reason")
		default:
			c.bad("state", "empty")
		}
		v.Tokens = append(v.Tokens, t)
	}
	if c.Err() == nil && len(v.Tokens) != n {
		c.bad("tokens", fmt.Sprintf("%d tokens answered, %d sent", len(v.Tokens), n))
	}
	if c.Err() != nil {
		return Status{}, c.Err()
	}
	return v, nil
}
