package issuer

// activeScript is lua/active.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); ARGV[3] = jti.
var activeScript = loadScript("active")

// activeReply is the active script's verdict (lua/active.lua):
// {'ACTIVE', expiry_ms}, {'EXPIRED', expiry_ms} or {'GONE'}.
type activeReply string

const (
	activeLive    activeReply = "ACTIVE"
	activeExpired activeReply = "EXPIRED"
	activeGone    activeReply = "GONE"
)

func decodeActive(r []any) (activeReply, error) {
	c := newReplyReader("active", r)
	v := activeReply(c.string())
	return v, c.err
}
