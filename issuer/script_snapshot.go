package issuer

import (
	"time"
)

// snapshotScript is lua/snapshot.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); no more.
var snapshotScript = loadScript("snapshot")

// decodeSnapshot decodes the snapshot script's reply (lua/snapshot.lua):
// {waiting, head_seq, tail_seq, room_state, rate, capacity, tick_ms, epoch,
// banned users, exact_through, before, closed_seq, close reason, ended_ms,
// priority lane length, the smallest and largest lane seq, the lane seqs,
// eta figures (decodeFigures), sampled expiries {j, expiry_ms, …}}; at is
// when the call was sent.
func decodeSnapshot(r []any, at time.Time) *snapshot {
	s := &snapshot{at: at, waiting: asInt(r[0]), head: asInt(r[1]), tail: asInt(r[2]),
		state: RoomState(asString(r[3])), rate: asInt(r[4]), capacity: asInt(r[5]),
		tick: time.Duration(asInt(r[6])) * time.Millisecond, epoch: asString(r[7])}
	if len(r) > 8 {
		if users, _ := r[8].([]any); len(users) > 0 {
			s.banned = make(map[string]struct{}, len(users))
			for _, u := range users {
				s.banned[asString(u)] = struct{}{}
			}
		}
	}
	if len(r) > 10 {
		s.exactThrough, s.before = asInt(r[9]), asInt(r[10])
	}
	if len(r) > 13 {
		s.closedSeq, s.closeReason, s.ended = asInt(r[11]), asString(r[12]), asInt(r[13])
	}
	if len(r) > 17 {
		s.priority, s.laneMin, s.laneMax = asInt(r[14]), asInt(r[15]), asInt(r[16])
		if seqs, _ := r[17].([]any); len(seqs) > 0 {
			s.laneSeqs = make(map[int64]struct{}, len(seqs))
			for _, q := range seqs {
				s.laneSeqs[asInt(q)] = struct{}{}
			}
		}
	}
	if len(r) > 19 {
		s.eta, s.hasETA = decodeFigures(r[18], s.rate)
		sample, _ := r[19].([]any)
		s.eta.sample = make([]rankedExpiry, 0, len(sample)/2)
		for i := 0; i+1 < len(sample); i += 2 {
			s.eta.sample = append(s.eta.sample, rankedExpiry{j: asInt(sample[i]), at: asInt(sample[i+1])})
		}
	}
	return s
}
