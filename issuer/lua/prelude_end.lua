-- The end of a room (docs/rooms.md#the-end-of-a-sale). A room is closed in effect
-- (cfg.state == 'closed') when an operator closed it (close, sold-out, DELETE)
-- or its event window ended (closes_ms). From that moment every entry still
-- waiting reads CLOSED (status answers it from the room's state: no write per
-- entry), nobody more is admitted, and the line is drained in bounded steps
-- (drain.lua). The end is recorded once by the first writing script that sees
-- it (note_end): closed_seq, close_reason, ended_ms, and every room key set to
-- expire a retention after ended_ms.

-- end_reason is why the room is closed in effect now: the recorded reason, or
-- (the end not recorded yet) 'closed' for a room closed by its state,
-- 'event_ended' for one whose event window ended.
local function end_reason(cfg)
  if cfg.ended > 0 and cfg.close_reason ~= '' then return cfg.close_reason end
  if cfg.configured == 'closed' then return 'closed' end
  return 'event_ended'
end

-- closed_line: does the entry with arrival seq belong to a line that closing
-- ended? Every entry while the room is closed in effect; after a reopening,
-- the entries of the closed line (seq <= closed_seq). Returns the reason, or nil.
local function closed_line(cfg, seq)
  if cfg.state == 'closed' then return end_reason(cfg) end
  if seq <= cfg.closed_seq then return cfg.close_reason ~= '' and cfg.close_reason or 'closed' end
  return nil
end

-- retention_ms is how long the room's keys live after its end: the room's
-- retention_ms, else the issuer's default (ARGV given by the caller).
local function retention_ms(cfg, default)
  if cfg.retention > 0 then return cfg.retention end
  return tonumber(default) or 86400000
end

-- apply_retention sets every key of the room to expire retention after its
-- end (PEXPIRE relative to the room's clock, so an injected clock and Redis's
-- agree on the remaining time). Keys a later write creates get it at the next
-- call (the tick re-applies it while the room has keys).
local function apply_retention(cfg, now, default)
  local ttl = math.max(1, cfg.ended + retention_ms(cfg, default) - now)
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], num(ttl)) end
end

-- note_end records the end of a room closed in effect whose end is not
-- recorded yet: closed_seq = the arrival counter (enters are refused while
-- closed, so it no longer moves), the reason, ended_ms (the window's close
-- for a room whose event window ended, else now), and the keys' expiry.
local function note_end(cfg, now, reason, default)
  local seq = tonumber(redis.call('GET', K_SEQ) or '0')
  local at = now
  if cfg.configured ~= 'closed' and cfg.closes > 0 and cfg.closes < now then at = cfg.closes end
  reason = reason or end_reason(cfg)
  redis.call('HSET', K_CONFIG, 'closed_seq', num(seq), 'close_reason', reason, 'ended_ms', num(at))
  cfg.closed_seq, cfg.close_reason, cfg.ended = seq, reason, at
  pack_config()
  apply_retention(cfg, now, default)
  journal_config(cfg, 'end')
end
