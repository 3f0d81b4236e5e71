-- tick: one admission step for one room (bounded by the room's batch):
--   1. drop lapsed admissions (at most batch per call) and old ended records;
--   2. admit min(capacity - live, rate budget, batch) from the head of the line.
-- Safe to run from any number of replicas at once: all limits live in Redis.
-- Returns {admitted, expired, live, waiting, tick_ms} or {'ERROR', code}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)

local lapsed = redis.call('ZRANGEBYSCORE', K_ACTIVE, '-inf', num(now), 'LIMIT', 0, cfg.batch)
for _, j in ipairs(lapsed) do
  redis.call('ZREM', K_ACTIVE, j)
  end_entry('E', seq_of(j) or 0, now)
end
if #lapsed > 0 then redis.call('HINCRBY', K_STATS, 'expired', #lapsed) end
-- Ended records are kept long enough to answer status and repeated
-- completions for any token still valid: twice the session, at least 10 min.
redis.call('ZREMRANGEBYSCORE', K_ENDED, '-inf', num(now - math.max(2 * cfg.session, 600000)))
keep_clock(cfg, now)

local admitted = 0
local live = live_count(now)
if cfg.state == 'open' and live < cfg.capacity and redis.call('ZCARD', K_WAITING) > 0 then
  local budget, tokens = rate_budget(cfg, now)
  local n = math.min(cfg.capacity - live, budget, cfg.batch)
  if n > 0 then
    local popped = redis.call('ZPOPMIN', K_WAITING, n)
    for i = 1, #popped, 2 do
      admit(cfg, popped[i], tonumber(popped[i + 1]), now)
      admitted = admitted + 1
    end
    rate_consume(tokens, admitted, now)
    redis.call('HINCRBY', K_STATS, 'admitted', admitted)
    live = note_peak(now)
  end
end
return { admitted, #lapsed, live, redis.call('ZCARD', K_WAITING), cfg.tick }
