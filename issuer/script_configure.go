package issuer

import (
	"time"
)

// configureScript is lua/configure.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); ARGV[3] = a fresh lottery seed or "", ARGV[4] = close reason or "", ARGV[5] = default
// retention (ms), ARGV[6] = '1' to delete, ARGV[7…] = config field, value pairs.
var configureScript = loadScript("configure")

// setRoomReply is the configure script's reply (lua/configure.lua): {state
// in effect, ended_ms, close_reason, deleted_ms, waiting}.
type setRoomReply struct {
	state       RoomState
	ended       time.Time
	closeReason string
	deleted     time.Time
	waiting     int64
}

func decodeSetRoom(r []any) (setRoomReply, error) {
	c := newReplyReader("configure", r)
	v := setRoomReply{state: RoomState(c.string()), ended: windowTime(c.int64()),
		closeReason: c.string(), deleted: windowTime(c.int64()), waiting: c.int64()}
	return v, c.err
}
