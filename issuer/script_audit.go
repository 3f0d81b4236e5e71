package issuer

// auditScript is lua/audit.lua (with the prelude definitions it uses). KEYS: the room's keys
// (roomKeys: lua/prelude.lua's layout). ARGV[1] = now (ms, "": Redis TIME), ARGV[2] = "" (no create
// policy); ARGV[3] = actor, ARGV[4] = action, ARGV[5] = detail (JSON, "" for {}).
var auditScript = loadScript("audit")
