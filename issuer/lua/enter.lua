-- enter: ARGV[3] = user. Idempotent: a user already waiting or admitted gets
-- the same entry back, so refreshes, double clicks and go-redis retries never
-- create a second place in line (invariant 1).
-- Hot path (a new user joining a non-empty line): HMGET, ZSCORE, HGET, INCR,
-- ZCARD, ZADD — no clock read and no clock write, since joining the line
-- depends on arrival order only.
local cfg, created = load_config(true)
if not cfg then return { 'ERROR', 'unknown_room' } end
if cfg.state == 'closed' then return { 'ERROR', 'room_closed' } end
local user = ARGV[3]

local s = redis.call('ZSCORE', K_WAITING, user)
if s then
  return result(cfg, 'WAITING', tonumber(s), redis.call('ZRANK', K_WAITING, user) + 1, '', 0, created)
end

local now -- read only where time matters
local j = redis.call('HGET', K_USERS, user)
if j then
  now = now_ms(cfg)
  local e = redis.call('ZSCORE', K_ACTIVE, j)
  if e and tonumber(e) > now then
    return result(cfg, 'ACTIVE', seq_of(j), 0, j, tonumber(e), created)
  end
  -- The index points at a lapsed admission or at nothing (a zombie, invariant 5):
  -- clean it up and let the user queue again.
  keep_clock(cfg, now)
  redis.call('HDEL', K_USERS, user)
  if e then
    redis.call('ZREM', K_ACTIVE, j)
    end_entry('E', seq_of(j), now)
    redis.call('HINCRBY', K_STATS, 'expired', 1)
  elseif not ended(seq_of(j) or 0) then
    redis.call('HINCRBY', K_STATS, 'zombies', 1)
  end
end

local seq = redis.call('INCR', K_SEQ) -- also the room's count of entries ever created
local waiting = redis.call('ZCARD', K_WAITING)
-- Fast track (seed 000): nobody waits, and capacity and rate allow.
if cfg.state == 'open' and waiting == 0 then
  now = now or now_ms(cfg)
  if live_count(now) < cfg.capacity then
    local budget, tokens = rate_budget(cfg, now)
    if budget >= 1 then
      keep_clock(cfg, now)
      rate_consume(tokens, 1, now)
      local jti, exp = admit(cfg, user, seq, now)
      redis.call('HINCRBY', K_STATS, 'admitted', 1)
      redis.call('HINCRBY', K_STATS, 'fast_track', 1)
      note_peak(now)
      return result(cfg, 'ACTIVE', seq, 0, jti, exp, created)
    end
  end
end
-- seq is larger than every score in the line, so the new entry is last.
redis.call('ZADD', K_WAITING, seq, user)
return { 'WAITING', seq, waiting + 1, waiting + 1, '', 0, created, cfg.rate, cfg.state, cfg.capacity }
