-- snapshot: the cheap summary a replica keeps per room to answer status for
-- users far back in line without a Redis call each (issuer/snapshot.go).
-- Returns {waiting (public line), head_seq, tail_seq, room_state, rate, capacity, tick_ms, epoch,
--          banned users (all of them while there are at most 1,000, else none),
--          exact_through, before, closed_seq, close reason (of the line a CLOSED entry was in), ended_ms,
--          priority lane length, the smallest and largest lane seq, the lane seqs (at most 1,000, else none),
--          eta: the room's figures (eta_figures; {} while closed),
--          expiries: {j, expiry_ms, …} for up to 17 live admissions evenly spread over the
--          live ones by expiry rank (j = 1 is the earliest, the last is the latest), so
--          that the replica interpolates eta_expiry for any position (issuer/eta.go)}:
-- status answers a listed user with the exact script, so a waiting user
-- removed by a ban reads REVOKED within a snapshot's age, however far back they were.
-- The pre-queue lottery (prelude draw_lottery): entries with seq <= exact_through are
-- answered by the exact script (their place is drawn, or not drawn yet, so their seq says
-- nothing of it); head_seq is then the first waiting entry after them in arrival order, and
-- before how many waiting entries (drawn or pre-queue) are ahead of it.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local banned = {}
local nb = redis.call('ZCARD', K_BANS)
if nb > 0 and nb <= 1000 then banned = redis.call('ZRANGE', K_BANS, 0, -1) end
local t = redis.call('ZRANGE', K_WAITING, -1, -1, 'WITHSCORES')
local tail = tonumber(t[2] or '0')
local exact, before = 0, 0
local h
if cfg.cutoff then
  exact = cfg.cutoff
  before = redis.call('ZCOUNT', K_WAITING, '-inf', num(cfg.cutoff))
  h = redis.call('ZRANGEBYSCORE', K_WAITING, '(' .. num(cfg.cutoff), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
elseif cfg.prequeue == 'shuffle' then
  exact = math.max(0, tail) -- all of them in the pre-queue
  h = redis.call('ZRANGE', K_WAITING, 0, 0, 'WITHSCORES')
else
  h = redis.call('ZRANGE', K_WAITING, 0, 0, 'WITHSCORES')
end
if tail < 0 then tail = 0 end -- only drawn entries wait: none after them
local why = cfg.close_reason ~= '' and cfg.close_reason or 'closed' -- of the closed line
if cfg.state == 'closed' then why = end_reason(cfg) end

-- The lanes (reply fields 15-18): the priority lane's length (a public entry's interpolated
-- position adds it), then the seqs of entries created through a lane that the public line
-- has not passed (laneseqs: waiting in the lane, admitted from it, or admitted by a bypass
-- invite): the smallest and the largest, and all of them while there are at most 1,000.
-- Status answers those exactly (with more, every seq between the two): their seqs fall
-- among the public line's, and an interpolated public place would be wrong for them.
local nlane = redis.call('ZCARD', K_LANESEQS)
local lmin, lmax, lseqs = 0, 0, {}
if nlane > 0 then
  lmin = tonumber(redis.call('ZRANGE', K_LANESEQS, 0, 0)[1])
  lmax = tonumber(redis.call('ZRANGE', K_LANESEQS, -1, -1)[1])
  if nlane <= 1000 then lseqs = redis.call('ZRANGE', K_LANESEQS, 0, -1) end
end
-- The estimate's figures (reply fields 19-20), read as status reads them.
local eta, expiries = {}, {}
if cfg.state ~= 'closed' then
  local now = now_ms(cfg)
  eta = eta_figures(cfg, now)
  eta_measure(eta)
  local live = eta[3]
  if live > 0 then
    local lapsed = eta_lapsed(eta)
    local k = math.min(live, 17)
    for i = 0, k - 1 do
      local j = 1
      if k > 1 then j = 1 + math.floor(i * (live - 1) / (k - 1)) end
      local e = redis.call('ZRANGE', K_ACTIVE, lapsed + j - 1, lapsed + j - 1, 'WITHSCORES')
      expiries[#expiries + 1] = j
      expiries[#expiries + 1] = tonumber(e[2] or '0')
    end
  end
end
return { redis.call('ZCARD', K_WAITING), tonumber(h[2] or '0'), tail,
  cfg.state, cfg.rate, cfg.capacity, cfg.tick, cfg.epoch, banned, exact, before,
  cfg.closed_seq, why, cfg.ended, redis.call('ZCARD', K_PRIORITY), lmin, lmax, lseqs, eta, expiries }
