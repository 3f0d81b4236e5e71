-- snapshot: the cheap summary a replica keeps per room to answer status for
-- users far back in line without a Redis call each (issuer/snapshot.go).
-- Returns {waiting, head_seq, tail_seq, room_state, rate, capacity, tick_ms, epoch,
--          banned users (all of them while there are at most 1,000, else none)}:
-- status answers a listed user with the exact script, so a waiting user
-- removed by a ban reads REVOKED within a snapshot's age, however far back they were.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local banned = {}
local nb = redis.call('ZCARD', K_BANS)
if nb > 0 and nb <= 1000 then banned = redis.call('ZRANGE', K_BANS, 0, -1) end
local h = redis.call('ZRANGE', K_WAITING, 0, 0, 'WITHSCORES')
local t = redis.call('ZRANGE', K_WAITING, -1, -1, 'WITHSCORES')
return { redis.call('ZCARD', K_WAITING), tonumber(h[2] or '0'), tonumber(t[2] or '0'),
  cfg.state, cfg.rate, cfg.capacity, cfg.tick, cfg.epoch, banned }
