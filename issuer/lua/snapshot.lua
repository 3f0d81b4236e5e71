-- snapshot: the cheap summary a replica keeps per room to answer status for
-- users far back in line without a Redis call each (issuer/snapshot.go).
-- Returns {waiting, head_seq, tail_seq, room_state, rate, capacity, tick_ms, epoch}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local h = redis.call('ZRANGE', K_WAITING, 0, 0, 'WITHSCORES')
local t = redis.call('ZRANGE', K_WAITING, -1, -1, 'WITHSCORES')
return { redis.call('ZCARD', K_WAITING), tonumber(h[2] or '0'), tonumber(t[2] or '0'),
  cfg.state, cfg.rate, cfg.capacity, cfg.tick, cfg.epoch }
