package issuer

import (
	"strconv"
	"strings"
	"time"
)

// bansScript is lua/bans.lua (with the prelude definitions it uses). KEYS: the room's keys (roomKeys:
// lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create policy);
// ARGV[3], ARGV[4] = the cursor (end ms, user; "" for the first page), ARGV[5] = page size.
var bansScript = loadScript("bans")

// decodeBans decodes the bans script's reply (lua/bans.lua): {total, then
// per ban user, banned_until_ms, "<banned_ms>:<reason>"}.
func decodeBans(r []any) (total int64, bans []Ban) {
	if len(r) == 0 {
		return 0, nil
	}
	total = asInt(r[0])
	for i := 1; i+2 < len(r); i += 3 {
		b := Ban{User: asString(r[i]), Until: time.UnixMilli(asInt(r[i+1]))}
		at, reason, _ := strings.Cut(asString(r[i+2]), ":")
		if ms, err := strconv.ParseInt(at, 10, 64); err == nil {
			b.BannedAt = time.UnixMilli(ms)
		}
		b.Reason = reason
		bans = append(bans, b)
	}
	return total, bans
}
