-- seq_of returns the arrival seq of a jti "<epoch>.<seq>.<admno>.<admitted_ms>" of this room's
-- current epoch, or nil for any other string (an id minted before a data loss, or garbage); and
-- second, the seq's digits as the jti has them (num(seq) for a jti the room minted).
-- The epoch ([0-9a-z]+, no '.') is compared as the jti's prefix "<epoch>." and only the rest
-- matched (a plain find, then the digits): the whole id matched with a class cost ~8k instructions.
local function seq_of(cfg, jti)
  local p = cfg.jti_prefix
  if not p then p = cfg.epoch .. '.'; cfg.jti_prefix = p end
  if string.find(jti, p, 1, true) ~= 1 then return nil end
  local s = string.match(jti, '^(%d+)%.%d+%.%d+$', #p + 1)
  if not s then return nil end
  return tonumber(s), s
end

-- end_entry records the end of entry seq (kind C, R, E, N or L: the ended record's prefix) and
-- journals it, with what the caller knows of the user, the admission (jti) and the reason.
local function end_entry(cfg, kind, seq, now, user, jti, reason)
  redis.call('ZADD', K_ENDED, now, kind .. ':' .. cfg.epoch .. '.' .. num(seq))
  if kind == 'E' then reason = 'session_ended' elseif kind == 'N' then reason = 'not_claimed' end
  journal_entry(cfg, JOURNAL_KINDS[kind], seq, now, user, '', jti, reason)
end

-- ended returns the kind and time of entry seq's ended record (the first of C, R, E, L, N that
-- exists: one ZMSCORE), or nil, 0.
local function ended(cfg, seq)
  local id = ':' .. cfg.epoch .. '.' .. num(seq)
  local at = redis.call('ZMSCORE', K_ENDED, 'C' .. id, 'R' .. id, 'E' .. id, 'L' .. id, 'N' .. id)
  for i = 1, 5 do
    if at[i] then return string.sub('CRELN', i, i), tonumber(at[i]) end
  end
  return nil, 0
end

local function live_count(now)
  return redis.call('ZCOUNT', K_ACTIVE, '(' .. num(now), '+inf')
end

