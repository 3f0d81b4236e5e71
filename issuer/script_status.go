package issuer

import (
	"github.com/flashgate/flashgate"
)

// statusScript is lua/status.lua (with the prelude definitions it uses). KEYS: the room keys it
// uses, statusKeys (assembleKeys: indices into roomKeys, lua/prelude.lua's layout; fewer keys, less
// per call). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create policy), ARGV[3] = the
// call's epoch (its first token's), ARGV[4] = the claims ("c" at byte k: token k claims, an
// exchange; "": no claim); per token two more: user, and ref: the arrival seq, followed by "/" and
// the token's epoch when it is not the call's (statusItems).
var statusScript, statusKeys = loadScriptKeys("status")

// decodeStatusBatch decodes the status script's reply for n tokens
// (lua/status.lua), one flat list: {total_waiting, rate, room_state, eta
// figures (decodeFigures; {} when nobody in the call waits, or the room is
// closed), then per token, in order, "WAITING", seq, position, lane,
// expiry_ms, or state, seq, jti, at_ms, banned_until_ms, reason (every other
// state)}; position 0 of a WAITING entry: in the pre-queue (preQueue). A
// reply of any other shape is a flashgate.CodeInternal error.
func decodeStatusBatch(r []any, n int) ([]outcome[scriptEntry], error) {
	bad := func() ([]outcome[scriptEntry], error) {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "status script: malformed reply for %d tokens: %v", n, r)
	}
	if len(r) < 4 {
		return bad()
	}
	head := scriptEntry{total: asInt(r[0]), rate: asInt(r[1]), roomState: RoomState(asString(r[2]))}
	if head.roomState == "" {
		return bad()
	}
	eta, hasETA := decodeFigures(r[3], head.rate)
	out := make([]outcome[scriptEntry], 0, n)
	for i := 4; i < len(r); {
		if i+2 > len(r) {
			return bad()
		}
		e := head
		e.state, e.seq = flashgate.State(asString(r[i])), asInt(r[i+1])
		switch {
		case e.state == flashgate.StateWaiting:
			if i+5 > len(r) {
				return bad()
			}
			e.pos, e.lane = asInt(r[i+2]), asString(r[i+3])
			e.preQueue = e.pos == 0
			if hasETA {
				e.eta, e.hasETA = eta.forPosition(e.pos, asInt(r[i+4])), true
			}
			i += 5
		case e.state != "":
			if i+6 > len(r) {
				return bad()
			}
			e.jti, e.at, e.bannedUntil, e.reason = asString(r[i+2]), asInt(r[i+3]), asInt(r[i+4]), asString(r[i+5])
			i += 6
		default:
			return bad()
		}
		out = append(out, outcome[scriptEntry]{res: e})
	}
	if len(out) != n {
		return bad()
	}
	return out, nil
}
