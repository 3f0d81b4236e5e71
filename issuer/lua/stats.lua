-- stats: a consistent snapshot of one room.
-- Returns {found, waiting, live, config..., stats HGETALL flat list}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
return { 'OK', redis.call('ZCARD', K_WAITING), live_count(now), cfg.state, cfg.capacity, cfg.rate,
  cfg.session, cfg.batch, cfg.tick, redis.call('HGETALL', K_STATS), now,
  tonumber(redis.call('GET', K_SEQ) or '0') }
