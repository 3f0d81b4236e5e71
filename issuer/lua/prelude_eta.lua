-- Estimates (docs/rooms.md#estimated-wait; the rule itself is Go's, issuer/eta.go, so the exact
-- and the snapshot paths compute it one way). eta_figures gathers the room's figures with
-- one O(log n) call and no write:
--   {now_ms, capacity, live, admits, ends, window_ms, session_ms, batch, tick_ms, opens_ms,
--    configured state}
-- opens_ms is the opening time while it is still ahead, else 0. admits, ends and window_ms,
-- the measured history, are 0 until eta_measure fills them (only an entry that waits for
-- capacity needs them: eta_expiry calls it). The caller appends eta_expiry's answer.
local function eta_figures(cfg, now)
  local opens = 0
  if cfg.opens > now then opens = cfg.opens end
  return { now, cfg.capacity, live_count(now), 0, 0, 0, cfg.session, cfg.batch, cfg.tick, opens, cfg.configured }
end

-- eta_lapsed returns how many admissions in active have lapsed at fig's now (not live, not yet
-- dropped): the rank of the earliest live expiry. Read once, and only by a caller that ranks.
local function eta_lapsed(fig)
  fig.lapsed = fig.lapsed or redis.call('ZCOUNT', K_ACTIVE, '-inf', num(fig[1]))
  return fig.lapsed
end

-- eta_measure fills fig's measured history (once): admits and ends count the admission log
-- (admits) and the ended records (ended) in the window (now - window_ms, now], window_ms =
-- min(60 s, now - first_admit_ms) (0: no admission yet, no history). Three O(log n) calls.
local function eta_measure(fig)
  if fig.measured then return end
  fig.measured = true
  local now = fig[1]
  local first = tonumber(redis.call('HGET', K_STATS, 'first_admit_ms') or '')
  if first and first < now then
    local window = math.min(60000, now - first)
    local from = '(' .. num(now - window)
    fig[4] = redis.call('ZCOUNT', K_ADMITS, from, num(now))
    fig[5] = redis.call('ZCOUNT', K_ENDED, from, num(now))
    fig[6] = window
  end
end

-- eta_expiry returns, for the entry at position pos, the expiry (ms) of the live admission
-- whose end frees the slot it waits for, or 0 when it waits for none: j = pos - capacity + live
-- slots must free first; the j-th earliest live expiry (by rank: O(log n)) when j <= live, else
-- (every later slot an admission made at most a whole number m of sessions later) the
-- (j - m * capacity)-th, or 0 when that is a slot free now. issuer/eta.go capBound reads it.
-- An entry that waits for capacity also needs the measured history (eta_measure).
-- ahead (optional): how many more positions right after pos the caller will ask about (enter's
-- newcomers, consecutive): the expiries of that many more ranks are read with this one, in one
-- ZRANGE, and kept in fig.ahead (rank -> expiry) for them; a caller that changes active after
-- the read drops fig.ahead.
local function eta_expiry(fig, pos, ahead)
  local capacity, live = fig[2], fig[3]
  local j = pos - capacity + live
  if j <= 0 then return 0 end
  eta_measure(fig)
  if j > live then
    j = j - math.ceil((j - live) / capacity) * capacity
    if j < 1 then return 0 end
  end
  local r = eta_lapsed(fig) + j - 1
  local c = fig.ahead
  if c and c[r] then return c[r] end
  local e = redis.call('ZRANGE', K_ACTIVE, r, r + (ahead or 0), 'WITHSCORES')
  if ahead and ahead > 0 then
    c = {}
    for i = 2, #e, 2 do c[r + i / 2 - 1] = tonumber(e[i]) end
    fig.ahead = c
  end
  return tonumber(e[2] or '0')
end

-- eta_pace works out once per fig what eta_shown's estimates share: fig.base, the wait until a
-- set opening (ms, 0: none), and fig.pace, admissions per ms, false when no estimate is shown (the
-- room neither open nor paused until a set opening, or no pace). Returns fig.pace. A caller may
-- skip eta_shown once fig.pace is false.
local function eta_pace(cfg, fig)
  local now, opens = fig[1], fig[10]
  fig.base, fig.pace = 0, false
  if cfg.state == 'paused' and fig[11] == 'open' and opens > now then
    fig.base = opens - now
  elseif cfg.state ~= 'open' then
    return false
  end
  local pace = cfg.rate / 60000
  if fig[8] > 0 and fig[9] > 0 then pace = math.min(pace, fig[8] / fig[9]) end
  if pace <= 0 then return false end
  fig.pace = pace
  return pace
end

-- eta_shown is the estimated wait (ms, a decimal string) the issuer shows for the entry at pos
-- (>= 1) given fig and its eta_expiry answer, or nil for none: issuer/eta.go's forPosition,
-- wait and estimate, operation for operation (the same doubles, so the same value; a test
-- compares them). Only for the journal's entered event (the estimate-error metric): no call.
local function eta_shown(cfg, fig, pos, expiry)
  local pace = fig.pace
  if pace == nil then pace = eta_pace(cfg, fig) end
  if not pace then return nil end
  local now, capacity, live, session = fig[1], fig[2], fig[3], fig[7]
  local ms = pos / pace
  local j = pos - capacity + live
  if j > 0 and fig[6] >= 5000 then -- minHistory
    local m, k, slot = 0, j, 0
    if k > live and capacity > 0 then
      m = math.floor((k - live + capacity - 1) / capacity)
      k = k - m * capacity
    end
    if k < 1 then slot = m * session else slot = math.max(0, expiry - now) + m * session end
    local fp = math.min(fig[4], fig[5]) / fig[6]
    if fp > 0 then slot = math.min(slot, j / fp) end
    ms = math.max(ms, slot)
  end
  return num(fig.base + math.floor(ms + 0.5))
end

