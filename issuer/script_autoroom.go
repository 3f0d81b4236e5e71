package issuer

import (
	"github.com/flashgate/flashgate/issuer/store"
)

// autoRoomScript is lua/autoroom.lua. Not a room's script (no prelude): KEYS[1] = fg:autorooms;
// ARGV[1] = room, ARGV[2] = now (ms), ARGV[3] = the most auto rooms. Reply 1 (a slot held) or 0.
var autoRoomScript = store.LoadPlain("autoroom")
