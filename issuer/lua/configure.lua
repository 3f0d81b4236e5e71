-- configure: issuer.SetRoom's write of a room's configuration. ARGV[3] = a fresh lottery seed (32 hex
-- digits) when the new configuration's prequeue is 'shuffle', else ''; ARGV[4], ARGV[5], … = config
-- hash field, value pairs to set. Returns {'OK'}.
-- In one step, so no script runs between the old configuration and the new:
--   1. load_config under the configuration in effect until now (a lottery due under it is drawn);
--   2. a room switched to shuffle after its sale has begun (anyone admitted already, or anyone entered
--      while it is open in effect) has no pre-queue: its lottery is recorded as drawn with cutoff 0, so
--      the line it has (arrivals after the opening among them) is never shuffled. A room nobody has
--      entered yet may be switched whatever its state (a new room is open by default);
--   3. the seed is set only if none is stored (HSETNX): it never changes once set, so a draw can be
--      audited against the commitment shown before it (issuer.Stats);
--   4. the fields are written.
local old = load_config(false)
if ARGV[3] ~= '' then
  if old and not old.cutoff and old.prequeue ~= 'shuffle' and
      (tonumber(redis.call('GET', K_ADMNO) or '0') > 0 or
        old.state == 'open' and tonumber(redis.call('GET', K_SEQ) or '0') > 0) then
    local now = now_ms(old)
    redis.call('HSET', K_CONFIG, 'lottery_cutoff', '0', 'lottery_bits', '1', 'lottery_ms', num(now),
      'lottery_done_ms', num(now))
    keep_clock(old, now)
  end
  redis.call('HSETNX', K_CONFIG, 'lottery_seed', ARGV[3])
end
redis.call('HSET', K_CONFIG, unpack(ARGV, 4))
return { 'OK' }
