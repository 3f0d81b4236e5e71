-- active: ARGV[3] = jti. Is the admission still live, by the room's clock
-- (now_ms: Redis TIME, never the caller's)? Read-only. Returns
-- {'ACTIVE', expiry_ms}, {'EXPIRED', expiry_ms} (lapsed, not yet dropped by a
-- tick) or {'GONE'}: not in the active set (revoked, completed, left, expired
-- and dropped, an id of an earlier epoch) or no such room; {'ERROR', 'room_stopped'} for a live
-- admission admitted before the room's not_before (Unix s, an operator's stop: complete.lua).
local cfg = load_config(false)
if not cfg then return { 'GONE' } end
local e = redis.call('ZSCORE', K_ACTIVE, ARGV[3])
if not e then return { 'GONE' } end
e = tonumber(e)
if not live_admission(ARGV[3], e, now_ms(cfg)) then return { 'EXPIRED', e } end
local nb = tonumber(redis.call('HGET', K_CONFIG, 'not_before')) or 0
if nb > 0 and tonumber(string.match(ARGV[3], '%.(%d+)$')) < nb * 1000 then return { 'ERROR', 'room_stopped' } end
return { 'ACTIVE', e }
