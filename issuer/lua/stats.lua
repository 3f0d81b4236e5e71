-- stats: a consistent snapshot of one room.
-- Returns {'OK', waiting, live, configured state, capacity, rate, session_ms, batch, tick_ms,
--          stats HGETALL flat list, now_ms, entries ever created, state in effect, opens_ms, closes_ms, epoch,
--          arrival_ms}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
return { 'OK', redis.call('ZCARD', K_WAITING), live_count(now), cfg.configured, cfg.capacity, cfg.rate,
  cfg.session, cfg.batch, cfg.tick, redis.call('HGETALL', K_STATS), now,
  tonumber(redis.call('GET', K_SEQ) or '0'), cfg.state, cfg.opens, cfg.closes, cfg.epoch, cfg.arrival }
