-- roombeacon: the figures of the room beacon (issuer/roombeacon.go; GET /v1/rooms/{room}/beacon), one
-- call per room per beacon refresh and replica, however many pages poll it. ARGV[3] = k, the most
-- bucket boundaries (0: none).
-- Returns {room_state, waiting (public line), priority lane length, head_seq, tail_seq, exact_through,
--          before, closed_seq, close reason, ended_ms, opens_ms, page_message, rate, tick_ms,
--          {b_1, c_1, b_2, c_2, …}}:
-- head, tail, exact_through and before as lua/snapshot.lua has them (the pre-queue lottery: seqs up to
-- exact_through are placed by the draw, not by their number; head is the first waiting seq after them,
-- before the waiting entries ahead of it). c_i is how many entries of the public line wait with a seq
-- in (exact_through, b_i] (one ZCOUNT each, exact): a page with arrival number s in (b_(i-1), b_i]
-- places itself between c_(i-1) + 1 and c_i. The boundaries run from head to tail at geometric
-- offsets (b_i = max(b_(i-1) + 1, head - 1 + floor(span^(i/k))), span = tail - head + 1, b_k = tail): one seq
-- wide near the head, a fixed fraction of the distance to it further back.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
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
local head = tonumber(h[2] or '0')
local why = cfg.close_reason ~= '' and cfg.close_reason or 'closed'
if cfg.state == 'closed' then why = end_reason(cfg) end

local bc = {}
local k = tonumber(ARGV[3]) or 0
if k > 0 and head > exact and tail >= head then
  local span, prev, lo = tail - head + 1, head - 1, '(' .. num(exact)
  for i = 1, k do
    local b = tail
    if i < k then b = math.max(prev + 1, head - 1 + math.floor(span ^ (i / k))) end
    if b > tail then b = tail end
    if b > prev then
      bc[#bc + 1] = b
      bc[#bc + 1] = redis.call('ZCOUNT', K_WAITING, lo, num(b))
      prev = b
    end
  end
end
return { cfg.state, redis.call('ZCARD', K_WAITING), redis.call('ZCARD', K_PRIORITY), head, tail, exact, before,
  cfg.closed_seq, why, cfg.ended, cfg.opens, redis.call('HGET', K_CONFIG, 'page_message') or '', cfg.rate or 0,
  cfg.tick or 0, bc }
