-- unban: ARGV[3] = user. Lifts the user's ban; the user may enter again (to
-- the back of the line). Returns {'UNBANNED', 1} when a ban was in effect,
-- {'UNBANNED', 0} when none was (never banned, lifted, or already ended).
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local e = redis.call('ZSCORE', K_BANS, ARGV[3])
if not e then return { 'UNBANNED', 0 } end
redis.call('ZREM', K_BANS, ARGV[3])
redis.call('HDEL', K_BANWHY, ARGV[3])
if tonumber(e) > now then return { 'UNBANNED', 1 } end
return { 'UNBANNED', 0 }
