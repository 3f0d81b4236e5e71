package issuer

// drainScript is lua/drain.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); ARGV[3] = the most entries to remove, ARGV[4] = default retention (ms).
var drainScript = loadScript("drain")

// decodeDrain decodes the drain script's reply (lua/drain.lua): {removed, left}.
func decodeDrain(r []any) (removed, left int, err error) {
	c := newReplyReader("drain", r)
	removed, left = c.int(), c.int()
	return removed, left, c.err
}
