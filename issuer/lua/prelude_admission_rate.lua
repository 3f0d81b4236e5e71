-- rate_budget returns how many admissions the rate allows right now, and the
-- bucket's current token count. Two limits, both shared by all replicas:
--   * the sliding log: admissions in (now-60s, now] never exceed the rate
--     (invariant 3, exact for every 60 s window);
--   * the token bucket: refills at rate/60000 per ms up to two ticks' worth,
--     so a minute's budget is spread over the minute instead of one burst.
local function rate_budget(cfg, now)
  redis.call('ZREMRANGEBYSCORE', K_ADMITS, '-inf', num(now - 60000))
  local window = cfg.rate - redis.call('ZCARD', K_ADMITS)
  local burst = math.max(1, math.ceil(cfg.rate * cfg.tick * 2 / 60000))
  local b = redis.call('HMGET', K_BUCKET, 'tokens', 'ts')
  local tokens = tonumber(b[1]) or burst
  local ts = tonumber(b[2]) or now
  if now > ts then tokens = math.min(burst, tokens + (now - ts) * cfg.rate / 60000) end
  return math.max(0, math.min(window, math.floor(tokens))), tokens
end

local function rate_consume(tokens, n, now)
  redis.call('HSET', K_BUCKET, 'tokens', tostring(tokens - n), 'ts', num(now))
end

-- admit moves one user into the active set, through lane (public, priority or bypass: the
-- journal's); the caller has checked capacity and rate.
-- The admission lasts the session (its score in active, and the token's exp). With an
-- arrival window shorter than the session it must also be claimed (an exchange, claim
-- below) before the window ends, else the tick ends it early as not claimed ('N'):
-- until then it is in the unclaimed set with its claim deadline.
local function admit(cfg, user, seq, now, lane)
  local admno = redis.call('INCR', K_ADMNO)
  local exp = now + cfg.session
  local jti = cfg.epoch .. '.' .. num(seq) .. '.' .. num(admno) .. '.' .. num(now)
  journal_entry(cfg, 'admitted', seq, now, user, lane, jti)
  redis.call('ZADD', K_ACTIVE, num(exp), jti)
  redis.call('HSET', K_USERS, user, jti)
  redis.call('ZADD', K_ADMITS, num(now), jti)
  if cfg.arrival > 0 and cfg.arrival < cfg.session then
    redis.call('ZADD', K_UNCLAIMED, num(now + cfg.arrival), jti)
  end
  return jti, exp
end

-- unclaimed_by returns the claim deadline of an admission not claimed yet, or nil
-- (claimed, admitted without a window, or ended).
local function unclaimed_by(jti)
  local d = redis.call('ZSCORE', K_UNCLAIMED, jti)
  if d then return tonumber(d) end
  return nil
end

-- live_admission: is the admission jti, whose expiry (score in active) is e, still live
-- at now: unexpired, and claimed or within its arrival window?
local function live_admission(jti, e, now)
  if tonumber(e) <= now then return false end
  local d = unclaimed_by(jti)
  return not d or d > now
end

-- drop_admission removes jti from the active set and, if it was never claimed, from the
-- unclaimed set; returns the ended-record kind an expiry of it is: 'N' (never claimed)
-- or 'E'. Every script that ends an admission calls it, so nothing lingers in unclaimed.
local function drop_admission(jti)
  redis.call('ZREM', K_ACTIVE, jti)
  if redis.call('ZREM', K_UNCLAIMED, jti) == 1 then return 'N' end
  return 'E'
end

-- drop_lapsed_index removes user's index entry j — one that names a lapsed admission (ending
-- it: its seq js, its expiry e), nothing (a zombie, invariant 5) or an admission of an earlier
-- epoch (invariant 6) — so the user may queue again (enter.lua, invite.lua).
local function drop_lapsed_index(cfg, user, j, js, e, now)
  redis.call('HDEL', K_USERS, user)
  if js and e then
    end_entry(cfg, drop_admission(j), js, now, user, j)
    redis.call('HINCRBY', K_STATS, 'expired', 1)
  elseif not (js and ended(cfg, js)) then
    redis.call('HINCRBY', K_STATS, 'zombies', 1)
  end
end

-- note_peak is called after every step that admitted someone (the tick, the enter fast
-- track): it keeps peak_active, and first_admit_ms (once) for eta_figures.
local function note_peak(now)
  local live = live_count(now)
  local peak = tonumber(redis.call('HGET', K_STATS, 'peak_active') or '0')
  if live > peak then redis.call('HSET', K_STATS, 'peak_active', live) end
  redis.call('HSETNX', K_STATS, 'first_admit_ms', num(now))
  return live
end

