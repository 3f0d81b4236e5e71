-- tick: one admission step for one room (bounded by the room's batch):
--   1. drop admissions not claimed within the arrival window (ended as 'N', not claimed), then
--      lapsed admissions (together at most ARGV[3] per call, batch per tick), and old ended
--      records (at most 10 * ARGV[3] per call);
--   2. place pre-queue entries the lottery has drawn but not scored yet (at most ARGV[3] per call;
--      prelude draw_lottery), and record lottery_done_ms when none is left;
--   3. admit min(capacity - live, rate budget, ARGV[3], what is left of batch) from the head of the
--      priority lane first, then from the head of the public line (one budget for both lanes) --
--      not while the lottery's placing is unfinished (the priority lane is never drawn: FIFO).
--   Used single-use invites past their expiry are trimmed with the ended records, and lane
--   entries' seqs the public line has passed (laneseqs).
-- Safe to run from any number of replicas at once: all limits live in Redis.
-- ARGV[2] is the replica's last known config of the room, or "": a room whose config was lost
-- with Redis's data is restored from it (with a new epoch; issuer.Run logs and counts it).
-- ARGV[3] = the most admissions and the most expiries this call may do
-- (issuer.MaxTickPerCall: Issuer.Tick works a batch off in calls of at most
-- that many); ARGV[4], ARGV[5] = admissions and expiries earlier calls of the
-- same tick did, so that the tick as a whole stays within the batch.
-- ARGV[6] = the issuer's default retention (ms); ARGV[7] = how long an auto
-- room may stay idle (nobody waiting, nothing live) before it is deleted (ms;
-- 0: never).
-- The end of a room (prelude "The end of a room"): a tick of a room closed
-- in effect records its end if no script has yet (note_end: an event window
-- that ended by itself), re-applies the keys' expiry (keys a later write
-- created get it too), and admits nobody; a reopened room never admits an
-- entry of the closed line (seq <= closed_seq), in either lane. The line (both lanes) is drained by
-- drain.lua, which Issuer.Tick calls while the reply's drain count says so.
-- Returns {admitted, expired, live, waiting (both lanes), tick_ms, created, then the room's config as
-- configured: state, capacity, rate, session_ms, batch, opens_ms, closes_ms, arrival_ms,
-- then not_claimed (how many of the expired were never claimed), drawn (pre-queue entries this call
-- placed), prequeue,
-- then drain (waiting entries of a closed line: > 0 while drain.lua has work), ended_ms, deleted_ms,
-- auto ('1' or '0'), close_reason, retention_ms (as configured, 0: the default), closed_out
-- (entries of the closed line this call found at the head and dropped instead of admitting),
-- then priority_admitted (how many of the admitted came from the priority lane)} or {'ERROR', code}.
local cfg, created = load_config(true)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local bound = tonumber(ARGV[3]) or cfg.batch
local max_expire = math.max(0, math.min(bound, cfg.batch - (tonumber(ARGV[5]) or 0)))
local max_admit = math.max(0, math.min(bound, cfg.batch - (tonumber(ARGV[4]) or 0)))

-- Admissions not claimed within the arrival window first: their slots go to the line below.
local unclaimed = {}
if max_expire > 0 then unclaimed = redis.call('ZRANGEBYSCORE', K_UNCLAIMED, '-inf', num(now), 'LIMIT', 0, max_expire) end
local not_claimed, window_ended = 0, 0
for _, j in ipairs(unclaimed) do
  redis.call('ZREM', K_UNCLAIMED, j)
  if redis.call('ZREM', K_ACTIVE, j) == 1 then -- (every script that ends an admission drops both)
    window_ended = window_ended + 1
    local s = seq_of(cfg, j)
    if s then end_entry(cfg, 'N', s, now, nil, j) end
  end
end
local lapsed = {}
if max_expire > #unclaimed then
  lapsed = redis.call('ZRANGEBYSCORE', K_ACTIVE, '-inf', num(now), 'LIMIT', 0, max_expire - #unclaimed)
end
for _, j in ipairs(lapsed) do
  local kind = drop_admission(j) -- 'N' when still unclaimed (its deadline fell past an earlier bound)
  if kind == 'N' then not_claimed = not_claimed + 1 end
  local s = seq_of(cfg, j)
  if s then end_entry(cfg, kind, s, now, nil, j) end -- an earlier epoch's admission leaves no record
end
not_claimed = not_claimed + window_ended
local expired = window_ended + #lapsed
if expired > 0 then redis.call('HINCRBY', K_STATS, 'expired', expired) end
if not_claimed > 0 then redis.call('HINCRBY', K_STATS, 'not_claimed', not_claimed) end
-- Ended records are kept long enough to answer status and repeated
-- completions for any token still valid: twice the session, at least 10 min.
-- Oldest first, at most 10 * bound per call (leaves are not bounded by the
-- batch; a delete costs about a microsecond, a tenth of an admission).
local old = redis.call('ZCOUNT', K_ENDED, '-inf', num(now - math.max(2 * cfg.session, 600000)))
if old > 0 then redis.call('ZREMRANGEBYRANK', K_ENDED, 0, math.min(old, 10 * bound) - 1) end
-- Bans that have ended, the same way (earliest end first, at most 10 * bound per call).
local unbanned = redis.call('ZCOUNT', K_BANS, '-inf', num(now))
if unbanned > 0 then
  local gone = redis.call('ZRANGE', K_BANS, 0, math.min(unbanned, 10 * bound) - 1)
  redis.call('ZREMRANGEBYRANK', K_BANS, 0, #gone - 1)
  redis.call('HDEL', K_BANWHY, unpack(gone))
end
-- Used invites past their expiry, the same way: an expired invite is refused by its expiry alone.
local spent = redis.call('ZCOUNT', K_INVITES, '-inf', num(now))
if spent > 0 then redis.call('ZREMRANGEBYRANK', K_INVITES, 0, math.min(spent, 10 * bound) - 1) end

-- The pre-queue lottery: the order was fixed when the cutoff was recorded; this places up to
-- bound entries still at their arrival seq (scores 1 … cutoff) at their lottery scores.
-- A seed still 'pending' (derived from the issuer's key, issuer/lottery_reveal.go) places nobody
-- until the issuer has revealed it (lua/lottery.lua): the line waits, nobody is admitted.
local drawn = 0
local seed = cfg.cutoff and not cfg.drawn_done and (redis.call('HGET', K_CONFIG, 'lottery_seed') or '')
if seed and seed ~= 'pending' then
  local pre = redis.call('ZRANGEBYSCORE', K_WAITING, 1, num(cfg.cutoff), 'WITHSCORES', 'LIMIT', 0, bound)
  if #pre > 0 then
    local z = {}
    for i = 1, #pre, 2 do
      z[#z + 1] = num(lottery_score(seed, cfg.epoch, cfg.bits, tonumber(pre[i + 1])))
      z[#z + 1] = pre[i]
    end
    redis.call('ZADD', K_WAITING, unpack(z))
    drawn = #pre / 2
    redis.call('HINCRBY', K_STATS, 'drawn', drawn)
  end
  if drawn < bound and redis.call('ZCOUNT', K_WAITING, 1, num(cfg.cutoff)) == 0 then
    redis.call('HSET', K_CONFIG, 'lottery_done_ms', num(now))
    cfg.drawn_done = now
  end
end

-- Lane entries' seqs the public line has passed: the snapshot interpolates only public entries
-- from the first one after the lottery's cutoff (in arrival order) on, so lane seqs below it
-- need no listing any more; with no such entry (an empty line, only drawn entries, or a shuffle
-- room's pre-queue, all answered exactly) none do. Earliest first, at most 10 * bound per call.
local passed
local first = nil
if cfg.cutoff or cfg.prequeue ~= 'shuffle' then
  first = redis.call('ZRANGEBYSCORE', K_WAITING, '(' .. num(cfg.cutoff or 0), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]
end
if first then
  passed = redis.call('ZCOUNT', K_LANESEQS, '-inf', '(' .. first) -- (a score above the cutoff is a seq)
else
  passed = redis.call('ZCARD', K_LANESEQS)
end
if passed > 0 then redis.call('ZREMRANGEBYRANK', K_LANESEQS, 0, math.min(passed, 10 * bound) - 1) end

local admitted, from_priority, closed_out = 0, 0, 0
local live = live_count(now)
local placing = cfg.cutoff and not cfg.drawn_done -- the lottery's placing is unfinished: nobody is admitted
local npri = redis.call('ZCARD', K_PRIORITY)
if cfg.state == 'open' and not placing and live < cfg.capacity and npri + redis.call('ZCARD', K_WAITING) > 0 then
  local budget, tokens = rate_budget(cfg, now)
  local n = math.min(cfg.capacity - live, budget, max_admit)
  local taken = 0 -- entries popped: admitted, or of a closed line
  if n > 0 and npri > 0 then
    local popped = redis.call('ZPOPMIN', K_PRIORITY, n)
    for i = 1, #popped, 2 do
      local s = tonumber(popped[i + 1]) -- a priority score is the seq itself
      if s <= cfg.closed_seq then
        closed_out = closed_out + 1 -- of a line closing ended: never admitted
      else
        admit(cfg, popped[i], s, now, 'priority')
        from_priority = from_priority + 1
      end
    end
    admitted, taken = from_priority, #popped / 2
  end
  if n > taken then
    local popped = redis.call('ZPOPMIN', K_WAITING, n - taken)
    for i = 1, #popped, 2 do
      local s = seq_of_score(cfg, popped[i + 1])
      if s <= cfg.closed_seq then
        closed_out = closed_out + 1 -- of a line closing ended: never admitted
      else
        admit(cfg, popped[i], s, now, 'public')
        admitted = admitted + 1
      end
    end
  end
  if admitted > 0 then
    rate_consume(tokens, admitted, now)
    redis.call('HINCRBY', K_STATS, 'admitted', admitted)
    if from_priority > 0 then redis.call('HINCRBY', K_STATS, 'priority_admitted', from_priority) end
    live = note_peak(now)
  end
  if closed_out > 0 then redis.call('HINCRBY', K_STATS, 'closed_out', closed_out) end
end
-- The clock is kept last, and only by a tick that changed something: under
-- maxmemory Redis refuses a script whose first write allocates (HSET), while
-- one that began by freeing (ZREM, ZPOPMIN) may go on; a tick that did
-- nothing writes nothing.
if expired > 0 or old > 0 or admitted > 0 or drawn > 0 then keep_clock(cfg, now) end
local waiting = redis.call('ZCARD', K_WAITING) + redis.call('ZCARD', K_PRIORITY) -- both lanes

-- The end. An auto room idle for ARGV[7] (nobody waiting, nothing live, no
-- time-dependent write since: clock_ms) is deleted, as DELETE does. With
-- nothing sold (no completion) it is also freed: its name is free at once
-- (an enter creates the room anew, load_config), not only after the
-- retention, so a name taken early by anyone is not lost for a day.
local idle = tonumber(ARGV[7]) or 0
if cfg.auto and cfg.state ~= 'closed' and idle > 0 and waiting == 0 and live == 0 then
  if cfg.clock == 0 then
    keep_clock(cfg, now) -- the idle time starts now
  elseif now - cfg.clock >= idle then
    redis.call('HSET', K_CONFIG, 'state', 'closed', 'deleted_ms', num(now))
    if (tonumber(redis.call('HGET', K_STATS, 'completed')) or 0) == 0 then redis.call('HSET', K_CONFIG, 'freed', '1') end
    cfg.state, cfg.configured, cfg.deleted = 'closed', 'closed', now
    note_end(cfg, now, 'deleted', ARGV[6])
  end
end
local drain = 0
if cfg.state == 'closed' then
  if cfg.ended == 0 then
    note_end(cfg, now, nil, ARGV[6])
  else
    apply_retention(cfg, now, ARGV[6])
  end
  drain = waiting
elseif cfg.closed_seq > 0 and waiting > 0 then
  -- entries of the closed line: drawn ones (negative scores) and those up to closed_seq, in either lane
  drain = redis.call('ZCOUNT', K_WAITING, '-inf', num(cfg.closed_seq)) +
    redis.call('ZCOUNT', K_PRIORITY, '-inf', num(cfg.closed_seq))
end
-- The config's packed copy, rewritten from the fields on every call (prelude: pack_config).
pack_config()
journal_flush(cfg)
local auto = '0'
if cfg.auto then auto = '1' end
return { admitted, expired, live, waiting, cfg.tick, created,
  cfg.configured, cfg.capacity, cfg.rate, cfg.session, cfg.batch, cfg.opens, cfg.closes, cfg.arrival, not_claimed,
  drawn, cfg.prequeue,
  drain, cfg.ended, cfg.deleted, auto, cfg.close_reason, cfg.retention, closed_out, from_priority }
