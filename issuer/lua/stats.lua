-- stats: a consistent snapshot of one room.
-- Returns {'OK', waiting, live, configured state, capacity, rate, session_ms, batch, tick_ms,
--          stats HGETALL flat list, now_ms, entries ever created, state in effect, opens_ms, closes_ms, epoch,
--          arrival_ms, prequeue, lottery: cutoff (-1: not drawn), bits, lottery_ms, lottery_done_ms (0: placing
--          unfinished), seed ('' until the cutoff is recorded: secret before the draw), commitment
--          (SHA-1 hex of the seed, '' without one), then the end: closed_seq, close_reason, ended_ms,
--          deleted_ms, auto ('1'/'0'), retention_ms, then priority (waiting in the priority lane; waiting
--          counts the public line only)}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
-- the close reason while closed in effect, or the recorded one of the last close
local function end_reason_or_none(c)
  if c.state == 'closed' then return end_reason(c) end
  return c.close_reason
end
local l = redis.call('HMGET', K_CONFIG, 'lottery_ms', 'lottery_seed')
local seed, commitment = '', ''
if l[2] then
  commitment = redis.sha1hex(l[2])
  if cfg.cutoff then seed = l[2] end
end
return { 'OK', redis.call('ZCARD', K_WAITING), live_count(now), cfg.configured, cfg.capacity, cfg.rate,
  cfg.session, cfg.batch, cfg.tick, redis.call('HGETALL', K_STATS), now,
  tonumber(redis.call('GET', K_SEQ) or '0'), cfg.state, cfg.opens, cfg.closes, cfg.epoch, cfg.arrival,
  cfg.prequeue, cfg.cutoff or -1, cfg.bits, tonumber(l[1] or '0'), cfg.drawn_done or 0, seed, commitment,
  cfg.closed_seq, end_reason_or_none(cfg), cfg.ended, cfg.deleted, cfg.auto and '1' or '0', cfg.retention,
  redis.call('ZCARD', K_PRIORITY) }
