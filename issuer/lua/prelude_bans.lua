-- Bans (KEYS 11 and 12; docs/rooms.md#bans). A ban costs one member in each key
-- per banned user, nothing per waiting user. Counters in stats: banned (bans
-- set), removed (waiting entries a ban removed from the line).
local K_BANS, K_BANWHY = KEYS[11], KEYS[12]

-- ban_user ends what user has in the room and bans them until ends (ms):
-- the waiting entry (in either lane) is removed (its token then reads REVOKED), the live
-- admission revoked as revoke.lua does, the user index dropped. A repeated
-- ban replaces the end and the reason, and is not counted again in stats
-- 'banned' while the first still lasts (a retry after a lost reply sets
-- the same ban twice). Frees first, then writes (see
-- keep_clock). Returns 1 if a waiting entry was removed, else 0, and the jti
-- of the admission it revoked, or ''.
local function ban_user(cfg, user, ends, reason, now)
  local removed, revoked = 0, ''
  local seq -- the removed waiting entry's arrival seq
  local prev = tonumber(redis.call('ZSCORE', K_BANS, user) or '0') -- the end of a ban in force, if any
  local s = redis.call('ZSCORE', K_WAITING, user)
  if s then
    redis.call('ZREM', K_WAITING, user)
    removed, seq = 1, seq_of_score(cfg, s)
  else
    local p = redis.call('ZSCORE', K_PRIORITY, user) -- a priority score is the seq itself
    if p then
      redis.call('ZREM', K_PRIORITY, user)
      removed, seq = 1, tonumber(p)
    end
  end
  local j = redis.call('HGET', K_USERS, user)
  if j then
    redis.call('HDEL', K_USERS, user)
    local js = seq_of(cfg, j)
    if js and redis.call('ZREM', K_ACTIVE, j) == 1 then
      revoked = j
      redis.call('ZREM', K_UNCLAIMED, j)
    end
  end
  keep_clock(cfg, now)
  if removed == 1 then
    end_entry(cfg, 'R', seq, now, user, '', 'banned')
    redis.call('HINCRBY', K_STATS, 'removed', 1)
  end
  if revoked ~= '' then
    end_entry(cfg, 'R', seq_of(cfg, revoked), now, user, revoked, 'banned')
    redis.call('HINCRBY', K_STATS, 'revoked', 1)
  end
  redis.call('ZADD', K_BANS, num(ends), user)
  redis.call('HSET', K_BANWHY, user, num(now) .. ':' .. reason)
  if prev <= now then redis.call('HINCRBY', K_STATS, 'banned', 1) end
  return removed, revoked
end

