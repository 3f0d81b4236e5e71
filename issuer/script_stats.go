package issuer

import (
	"time"
)

// statsScript is lua/stats.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); no more.
var statsScript = loadScript("stats")

// decodeStats decodes the stats script's reply (lua/stats.lua): {'OK',
// waiting, active, configured state, capacity, rate, session_ms, batch,
// tick_ms, stats HGETALL flat list, now_ms, entries ever created, state in
// effect, opens_ms, closes_ms, epoch, arrival_ms, prequeue, then the lottery:
// cutoff (−1: not drawn), bits, lottery_ms, lottery_done_ms, seed (” before
// the draw), commitment (” without a seed), then the end: closed_seq,
// close_reason, ended_ms, deleted_ms, auto, retention_ms, then priority}:
// Waiting counts both lanes, Priority the priority lane.
func decodeStats(room string, r []any) *Stats {
	st := &Stats{Room: room, Waiting: asInt(r[1]), Active: asInt(r[2]),
		Config: RoomConfig{State: RoomState(asString(r[3])), Capacity: int(asInt(r[4])),
			RatePerMinute: int(asInt(r[5])), SessionDuration: time.Duration(asInt(r[6])) * time.Millisecond,
			TickBatch: int(asInt(r[7])), Tick: time.Duration(asInt(r[8])) * time.Millisecond,
			Opens: windowTime(asInt(r[13])), Closes: windowTime(asInt(r[14])),
			ArrivalWindow: arrivalWindow(asInt(r[16])), PreQueue: preQueueOf(asString(r[17]))},
		At: time.UnixMilli(asInt(r[10])), Entered: asInt(r[11]), State: RoomState(asString(r[12])),
		Epoch: asString(r[15]), Priority: asInt(at(r, 30))}
	st.Waiting += st.Priority
	if len(r) > 29 {
		st.ClosedSeq = asInt(r[24])
		st.Config.CloseReason, st.Config.EndedAt = asString(r[25]), windowTime(asInt(r[26]))
		st.Config.DeletedAt, st.Config.Auto = windowTime(asInt(r[27])), asString(r[28]) == "1"
		st.Config.Retention = time.Duration(asInt(r[29])) * time.Millisecond
	}
	kv, _ := r[9].([]any)
	fields := map[string]*int64{"admitted": &st.Admitted, "fast_track": &st.FastTrack,
		"expired": &st.Expired, "not_claimed": &st.NotClaimed, "completed": &st.Completed, "revoked": &st.Revoked,
		"left": &st.Left, "zombies": &st.Zombies, "peak_active": &st.PeakActive,
		"banned": &st.Banned, "removed": &st.Removed, "closed_out": &st.ClosedOut,
		"priority_admitted": &st.PriorityAdmitted, "bypassed": &st.Bypassed, "invites_used": &st.InvitesUsed}
	var placed int64
	fields["drawn"] = &placed
	for i := 0; i+1 < len(kv); i += 2 {
		if p, ok := fields[asString(kv[i])]; ok {
			*p = asInt(kv[i+1])
		}
	}
	if cutoff, commitment := asInt(r[18]), asString(r[23]); cutoff >= 0 || commitment != "" {
		l := &Lottery{Commitment: commitment, Placed: placed}
		if cutoff >= 0 {
			l.Drawn, l.Cutoff, l.Bits, l.Seed = true, cutoff, int(asInt(r[19])), asString(r[22])
			l.DrawnAt, l.PlacedAt = windowTime(asInt(r[20])), windowTime(asInt(r[21]))
		}
		st.Lottery = l
	}
	return st
}
