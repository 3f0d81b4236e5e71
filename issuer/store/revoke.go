package store

import "context"

// Revoke is lua/revoke.lua's reply: {'REVOKED', at_ms, repeated, jti,
// banned_until_ms}.
type Revoke struct {
	AtMs          int64 // when the admission was revoked (the first time)
	Repeated      bool
	JTI           string
	BannedUntilMs int64 // 0: no ban
}

// RevokeArgs name the admission to revoke (User, or JTI, or both) and the
// ban that comes with it: Ban "" for the room's session duration, "0" for
// none, else ms; Reason its reason.
type RevokeArgs struct {
	User, JTI, Ban, Reason string
}

// Revoke runs lua/revoke.lua (replicated: WAIT under Options.Replicas).
// KEYS: the room's; ARGV: now, "", user, jti, ban, reason.
func (g *Gateway) Revoke(ctx context.Context, room string, a RevokeArgs) (Revoke, error) {
	r, err := g.runReplicated(ctx, revokeScript, room, roomKeysOf{room}.keys(), a.User, a.JTI, a.Ban, a.Reason)
	if err != nil {
		return Revoke{}, err
	}
	return decodeRevoke(r)
}

func decodeRevoke(r []any) (Revoke, error) {
	c := newReader("revoke", r)
	c.expect("tag", "REVOKED")
	v := Revoke{AtMs: c.int("at_ms"), Repeated: c.flag("repeated"), JTI: c.str("jti")}
	if c.more() {
		v.BannedUntilMs = c.int("banned_until_ms")
	}
	return v, c.Err()
}
