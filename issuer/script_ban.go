package issuer

import (
	"time"
)

// banScript is lua/ban.lua (with the prelude definitions it uses). KEYS: the room's keys (roomKeys:
// lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create policy);
// ARGV[3] = user, ARGV[4] = duration (ms), ARGV[5] = reason.
var banScript = loadScript("ban")

// decodeBan decodes the ban script's reply (lua/ban.lua): {'BANNED',
// banned_until_ms, removed, revoked jti or ”, now_ms}.
func decodeBan(user string, r []any) (*Ban, error) {
	c := newReplyReader("ban", r)
	c.string()
	b := &Ban{User: user, Until: time.UnixMilli(c.int64()), RemovedWaiting: c.int64() == 1, RevokedAdmission: c.string()}
	b.BannedAt = time.UnixMilli(c.int64())
	return b, c.err
}
