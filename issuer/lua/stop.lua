-- stop: moves the room's not_before (KEYS[1], the config hash) to the second after now by the room's
-- clock (the prelude's now_ms: ARGV[1] ms or Redis TIME, never before clock_ms), never backwards
-- (issuer/admin Stop). Returns it (Unix s), or 0 when the room does not exist. No prelude: it takes
-- the config hash alone.
local cfg = redis.call('HMGET', KEYS[1], 'state', 'clock_ms', 'not_before')
if not cfg[1] then return 0 end
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
now = math.max(now, tonumber(cfg[2]) or 0)
local nb = math.max(math.floor(now / 1000) + 1, tonumber(cfg[3]) or 0)
redis.call('HSET', KEYS[1], 'not_before', string.format('%d', nb))
return nb
