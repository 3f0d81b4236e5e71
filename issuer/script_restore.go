package issuer

// restoreScript is lua/restore.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); ARGV[3] = step (begin, members, finish), ARGV[4] = the journaled epoch, then the step's
// (lua/restore.lua). Reply {'OK'} or {'ERROR', code}.
var restoreScript = loadScript("restore")
