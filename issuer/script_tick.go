package issuer

import (
	"time"

	"github.com/flashgate/flashgate"
)

// tickScript is lua/tick.lua (with the prelude definitions it uses). KEYS: the room's keys (roomKeys:
// lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = the create policy (the
// replica's last known config); ARGV[3…] as lua/tick.lua's header lists (batch bounds, retention, idle
// time of an auto room).
var tickScript = loadScript("tick")

// tickReply is one tick script call's reply (lua/tick.lua):
// {admitted, expired, active, waiting, tick_ms, created, then the room's
// config as configured: state, capacity, rate, session_ms, batch, opens_ms,
// closes_ms, arrival_ms, then not_claimed, drawn, prequeue, then drain,
// ended_ms, deleted_ms, auto, close_reason, retention_ms, closed_out, then
// priority_admitted}.
type tickReply struct {
	admitted, expired int  // this call's admissions and expiries
	notClaimed        int  // of the expiries, those not claimed within the arrival window
	placed            int  // pre-queue entries this call moved to their lottery place
	priorityAdmitted  int  // of the admissions, those from the priority lane
	active, waiting   int  // after the call
	created           bool // the call restored the room from the replica's last known config
	drain             int  // waiting entries of a closed line, for drain.lua (0: none)
	closedOut         int  // entries of a closed line the call dropped from the head instead of admitting
	cfg               RoomConfig
}

// decodeTick decodes a tick reply; one of any other shape is a
// flashgate.CodeInternal error.
func decodeTick(r []any) (tickReply, error) {
	if len(r) < 24 {
		return tickReply{}, flashgate.Errorf(flashgate.CodeInternal, "tick script: malformed reply %v", r)
	}
	return tickReply{admitted: int(asInt(r[0])), expired: int(asInt(r[1])),
		active: int(asInt(r[2])), waiting: int(asInt(r[3])), created: asInt(r[5]) == 1,
		notClaimed: int(asInt(r[14])), placed: int(asInt(r[15])),
		drain: int(asInt(r[17])), closedOut: int(asInt(r[23])), priorityAdmitted: int(asInt(at(r, 24))),
		cfg: RoomConfig{State: RoomState(asString(r[6])), Capacity: int(asInt(r[7])),
			RatePerMinute: int(asInt(r[8])), SessionDuration: time.Duration(asInt(r[9])) * time.Millisecond,
			TickBatch: int(asInt(r[10])), Tick: time.Duration(asInt(r[4])) * time.Millisecond,
			Opens: windowTime(asInt(r[11])), Closes: windowTime(asInt(r[12])),
			ArrivalWindow: arrivalWindow(asInt(r[13])), PreQueue: preQueueOf(asString(r[16])),
			EndedAt: windowTime(asInt(r[18])), DeletedAt: windowTime(asInt(r[19])), Auto: asString(r[20]) == "1",
			CloseReason: asString(r[21]), Retention: time.Duration(asInt(r[22])) * time.Millisecond}}, nil
}
