package issuer

import (
	"time"
)

// revokeScript is lua/revoke.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); ARGV[3] = user or "", ARGV[4] = jti or "", ARGV[5] = the ban (ms; "": the session, "0":
// none), ARGV[6] = its reason.
var revokeScript = loadScript("revoke")

// revokeReply is the revoke script's reply (lua/revoke.lua):
// {'REVOKED', at_ms, repeated, jti, banned_until_ms}.
type revokeReply struct {
	at          time.Time // when the admission was revoked (the first time)
	repeated    bool
	jti         string
	bannedUntil int64 // ms, 0: no ban
}

func decodeRevoke(r []any) (revokeReply, error) {
	c := newReplyReader("revoke", r)
	c.string()
	v := revokeReply{at: time.UnixMilli(c.int64()), repeated: c.int64() == 1, jti: c.string()}
	if c.more() {
		v.bannedUntil = c.int64()
	}
	return v, c.err
}
