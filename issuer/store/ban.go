package store

import "context"

// Ban is lua/ban.lua's reply: {'BANNED', banned_until_ms, removed, revoked
// jti or ”, now_ms}.
type Ban struct {
	UntilMs          int64
	RemovedWaiting   bool   // the user's waiting entry was removed
	RevokedAdmission string // the admission the ban revoked, "" for none
	AtMs             int64  // when the ban was set
}

// Ban runs lua/ban.lua: bans user for durationMs with reason (replicated:
// WAIT under Options.Replicas). KEYS: the room's; ARGV: now, "", user,
// duration (ms), reason.
func (g *Gateway) Ban(ctx context.Context, room, user string, durationMs int64, reason string) (Ban, error) {
	r, err := g.runReplicated(ctx, banScript, room, roomKeysOf{room}.keys(), user, durationMs, reason)
	if err != nil {
		return Ban{}, err
	}
	return decodeBan(r)
}

func decodeBan(r []any) (Ban, error) {
	c := newReader("ban", r)
	c.expect("tag", "BANNED")
	b := Ban{UntilMs: c.int("banned_until_ms"), RemovedWaiting: c.flag("removed"), RevokedAdmission: c.str("revoked")}
	b.AtMs = c.int("now_ms")
	return b, c.Err()
}
