-- status: ARGV[3] = user, ARGV[4] = arrival seq from the (already authenticated)
-- waiting token. Read-mostly: it never admits or cleans up.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local user, seq = ARGV[3], tonumber(ARGV[4])

local s = redis.call('ZSCORE', K_WAITING, user)
if s and tonumber(s) == seq then -- the hot path needs no clock
  return result(cfg, 'WAITING', seq, redis.call('ZRANK', K_WAITING, user) + 1, '', 0, 0)
end
local now = now_ms(cfg)
local j = redis.call('HGET', K_USERS, user)
if j and seq_of(j) == seq then
  local e = redis.call('ZSCORE', K_ACTIVE, j)
  if e then
    if tonumber(e) > now then return result(cfg, 'ACTIVE', seq, 0, j, tonumber(e), 0) end
    return result(cfg, 'EXPIRED', seq, 0, j, tonumber(e), 0)
  end
end
-- The index names this entry's admission only while it is the user's
-- current one; after a re-entry it names the new admission, not ours.
local mine = ''
if j and seq_of(j) == seq then mine = j end
local kind, at = ended(seq)
if kind == 'C' then return result(cfg, 'COMPLETED', seq, 0, mine, at, 0) end
if kind == 'R' then return result(cfg, 'REVOKED', seq, 0, mine, at, 0) end
if kind == 'E' then return result(cfg, 'EXPIRED', seq, 0, mine, at, 0) end
return result(cfg, 'NOT_FOUND', seq, 0, '', 0, 0)
