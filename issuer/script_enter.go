package issuer

import (
	"github.com/flashgate/flashgate"
)

// enterScript is lua/enter.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = the create
// policy (the replica's last known config, else the default policy); ARGV[3…] = the users, in arrival
// order (one call per batch: issuer/batch.go).
var enterScript = loadScript("enter")

// decodeEnter decodes the enter script's reply for n users (lua/enter.lua):
// {created, rate, room_state, epoch, eta figures (decodeFigures; {} when
// nobody in the batch waits), then per user 1, seq, position,
// total_waiting, expiry_ms (WAITING, public line; position 0: in the
// pre-queue; expiry: the position's eta_expiry), 4, the same (WAITING,
// priority lane; also lua/invite.lua's), 2, seq, total_waiting, jti,
// expiry_ms (ACTIVE) or 3, banned_until_ms (refused: a scriptEntry with
// bannedUntil and no state)}.
// A reply of any other shape is a flashgate.CodeInternal error.
func decodeEnter(r []any, n int) ([]scriptEntry, error) {
	bad := func() ([]scriptEntry, error) {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "enter script: malformed reply for %d users: %v", n, r)
	}
	if len(r) < 5 || !flashgate.ValidEpoch(asString(r[3])) {
		return bad()
	}
	head := scriptEntry{created: asInt(r[0]) == 1, rate: asInt(r[1]), roomState: RoomState(asString(r[2])),
		epoch: asString(r[3])}
	eta, hasETA := decodeFigures(r[4], head.rate)
	out := make([]scriptEntry, 0, n)
	for i := 5; i < len(r); {
		e := head
		switch tag := asInt(r[i]); tag {
		case 1, 4:
			if i+5 > len(r) || !hasETA {
				return bad()
			}
			e.state, e.seq, e.pos, e.total = flashgate.StateWaiting, asInt(r[i+1]), asInt(r[i+2]), asInt(r[i+3])
			e.preQueue = e.pos == 0
			e.lane = flashgate.LanePublic
			if tag == 4 {
				e.lane = flashgate.LanePriority
			}
			e.eta, e.hasETA = eta.forPosition(e.pos, asInt(r[i+4])), true
			i += 5
		case 2:
			if i+5 > len(r) {
				return bad()
			}
			e.state, e.seq, e.total, e.jti, e.at = flashgate.StateActive, asInt(r[i+1]), asInt(r[i+2]), asString(r[i+3]), asInt(r[i+4])
			i += 5
		case 3:
			if i+2 > len(r) || asInt(r[i+1]) <= 0 {
				return bad()
			}
			e.bannedUntil = asInt(r[i+1])
			i += 2
		default:
			return bad()
		}
		out = append(out, e)
		head.created = false // only the first user's result reports the room's creation
	}
	if len(out) != n {
		return bad()
	}
	return out, nil
}
