-- leave: ARGV[3] = user, ARGV[4] = arrival seq, ARGV[5] = epoch (from the waiting token). Removes the waiting entry
-- (either lane), or
-- ends the live admission (freeing its capacity), and the user index.
-- Returns {'LEFT'} or {'NOT_FOUND'}; a repeated leave answers NOT_FOUND.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local user, seq = ARGV[3], tonumber(ARGV[4])
if ARGV[5] ~= cfg.epoch then return { 'NOT_FOUND' } end -- lost with an earlier epoch's data
-- The waiting entry, in the public line or the priority lane (whose scores are seqs).
for _, k in ipairs({ K_WAITING, K_PRIORITY }) do
  local s = redis.call('ZSCORE', k, user)
  if s and seq_of_score(cfg, s) == seq then
    redis.call('ZREM', k, user)
    keep_clock(cfg, now)
    end_entry(cfg, 'L', seq, now, user)
    redis.call('HINCRBY', K_STATS, 'left', 1)
    journal_flush(cfg)
    return { 'LEFT' }
  end
end
local j = redis.call('HGET', K_USERS, user)
if j and seq_of(cfg, j) == seq then
  redis.call('HDEL', K_USERS, user)
  if redis.call('ZREM', K_ACTIVE, j) == 1 then
    redis.call('ZREM', K_UNCLAIMED, j)
    keep_clock(cfg, now)
    end_entry(cfg, 'L', seq, now, user, j)
    redis.call('HINCRBY', K_STATS, 'left', 1)
    journal_flush(cfg)
    return { 'LEFT' }
  end
end
return { 'NOT_FOUND' }
