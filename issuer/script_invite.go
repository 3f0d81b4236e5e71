package issuer

// inviteScript is lua/invite.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); ARGV[3] = user, ARGV[4] = lane, ARGV[5] = the single-use invite's id or "", ARGV[6…] as
// lua/invite.lua lists. Reply: the enter script's, for one user (decodeEnter).
var inviteScript = loadScript("invite")
