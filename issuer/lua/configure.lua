-- configure: issuer.SetRoom's write of a room's configuration. ARGV[3] = a fresh lottery seed (32 hex
-- digits) when the new configuration's prequeue is 'shuffle', else ''; ARGV[4] = the reason of a close
-- ('' for the default: 'closed' for a room closed by its state, 'event_ended' for one past its event
-- window); ARGV[5] = the issuer's default retention (ms); ARGV[6] = '1' to delete the room (the caller
-- also sets state closed); ARGV[7], ARGV[8], … = config hash field, value pairs to set.
-- Returns {state in effect, ended_ms, close_reason, deleted_ms, waiting}.
-- In one step, so no script runs between the old configuration and the new:
--   1. load_config under the configuration in effect until now (a lottery due under it is drawn);
--   2. a room switched to shuffle after its sale has begun (anyone admitted already, or anyone entered
--      while it is open in effect) has no pre-queue: its lottery is recorded as drawn with cutoff 0, so
--      the line it has (arrivals after the opening among them) is never shuffled. A room nobody has
--      entered yet may be switched whatever its state (a new room is open by default);
--   3. the seed is set only if none is stored (HSETNX): it never changes once set, so a draw can be
--      audited against the commitment shown before it (issuer.Stats);
--   4. the fields are written;
--   5. what the change does to the room's end (docs/rooms.md#the-end-of-a-sale): closed in effect and the
--      end not recorded yet: note_end (closed_seq, reason, ended_ms, the keys' expiry); already
--      recorded: an explicit reason replaces the recorded one, and the expiry follows retention_ms;
--      delete: deleted_ms = now (once), reason 'deleted' unless the room had already ended (a
--      sold-out room stays sold out); no longer closed in effect (reopened, or closes moved later)
--      after an end: ended_ms and deleted_ms are removed and every key PERSISTed. The closed line
--      stays ended (closed_seq): reopening starts a new line.
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
redis.call('HSET', K_CONFIG, unpack(ARGV, 7))
redis.call('HDEL', K_CONFIG, 'packed') -- stale: the load_config below packs the fields anew

local cfg = load_config(false)
local now = now_ms(cfg)
local reason = nil
if ARGV[4] ~= '' then reason = ARGV[4] end
if ARGV[6] == '1' and cfg.deleted == 0 then
  cfg.deleted = now
  redis.call('HSET', K_CONFIG, 'deleted_ms', num(now))
  if cfg.ended == 0 then reason = 'deleted' end
end
if cfg.state == 'closed' then
  if cfg.ended == 0 then
    note_end(cfg, now, reason, ARGV[5])
  else
    if reason and reason ~= cfg.close_reason then
      redis.call('HSET', K_CONFIG, 'close_reason', reason)
      cfg.close_reason = reason
    end
    apply_retention(cfg, now, ARGV[5])
  end
elseif cfg.ended > 0 or cfg.deleted > 0 then
  redis.call('HDEL', K_CONFIG, 'ended_ms', 'deleted_ms')
  for i = 1, #KEYS do redis.call('PERSIST', KEYS[i]) end
  cfg.ended, cfg.deleted = 0, 0
end
pack_config()
keep_clock(cfg, now)
journal_config(cfg, 'configure')
return { cfg.state, cfg.ended, cfg.close_reason, cfg.deleted, redis.call('ZCARD', K_WAITING) }
