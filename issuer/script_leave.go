package issuer

// leaveScript is lua/leave.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); ARGV[3] = user, ARGV[4] = arrival seq, ARGV[5] = epoch.
var leaveScript = loadScript("leave")

// decodeLeave decodes the leave script's reply (lua/leave.lua): {'LEFT'}
// or {'NOT_FOUND'}; true when the entry was left.
func decodeLeave(r []any) (bool, error) {
	c := newReplyReader("leave", r)
	left := c.string() == "LEFT"
	return left, c.err
}
