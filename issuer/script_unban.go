package issuer

// unbanScript is lua/unban.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); ARGV[3] = user. Reply {'UNBANNED', 1 | 0}.
var unbanScript = loadScript("unban")
