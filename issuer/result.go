package issuer

import (
	"context"
	"github.com/flashgate/flashgate"
)

// scriptEntry is one entry as the enter and status scripts report it.
type scriptEntry struct {
	state           flashgate.State
	seq, pos, total int64 // arrival number, 1-based position (WAITING), users waiting
	jti             string
	at              int64 // ms: expiry (ACTIVE, EXPIRED) or end time (COMPLETED, REVOKED)
	created         bool  // the enter call created the room from the default policy
	rate            int64 // the room's new users per minute
	roomState       RoomState
	epoch           string // the room's epoch (enter; status leaves it "": the token carries it)
}

// statusResult decodes the status script's reply {state, seq, position,
// total_waiting, jti, at_ms, rate, room_state} (lua/status.lua).
func statusResult(r []any) scriptEntry {
	return scriptEntry{state: flashgate.State(asString(r[0])), seq: asInt(r[1]), pos: asInt(r[2]),
		total: asInt(r[3]), jti: asString(r[4]), at: asInt(r[5]), rate: asInt(r[6]),
		roomState: RoomState(asString(r[7]))}
}

// enterUsers runs the enter script for users, in that order, and decodes
// its reply (decodeEnter).
func (is *Issuer) enterUsers(ctx context.Context, room string, users ...any) ([]scriptEntry, error) {
	is.batchCalls.Add(1)
	is.batchUsers.Add(int64(len(users)))
	r, err := is.run(ctx, enterScript, room, users...)
	if err != nil {
		return nil, err
	}
	return decodeEnter(r, len(users))
}

// decodeEnter decodes the enter script's reply for n users (lua/enter.lua):
// created, rate, room_state, epoch, then per user 1, seq, position,
// total_waiting (WAITING) or 2, seq, total_waiting, jti, expiry_ms (ACTIVE).
// A reply of any other shape is a flashgate.CodeInternal error.
func decodeEnter(r []any, n int) ([]scriptEntry, error) {
	bad := func() ([]scriptEntry, error) {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "enter script: malformed reply for %d users: %v", n, r)
	}
	if len(r) < 4 || !flashgate.ValidEpoch(asString(r[3])) {
		return bad()
	}
	head := scriptEntry{created: asInt(r[0]) == 1, rate: asInt(r[1]), roomState: RoomState(asString(r[2])),
		epoch: asString(r[3])}
	out := make([]scriptEntry, 0, n)
	for i := 4; i < len(r); {
		e := head
		switch asInt(r[i]) {
		case 1:
			if i+4 > len(r) {
				return bad()
			}
			e.state, e.seq, e.pos, e.total = flashgate.StateWaiting, asInt(r[i+1]), asInt(r[i+2]), asInt(r[i+3])
			i += 4
		case 2:
			if i+5 > len(r) {
				return bad()
			}
			e.state, e.seq, e.total, e.jti, e.at = flashgate.StateActive, asInt(r[i+1]), asInt(r[i+2]), asString(r[i+3]), asInt(r[i+4])
			i += 5
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
