-- complete: ARGV[3] = user (token sub), ARGV[4] = jti. Atomic check-and-consume:
-- still active and not expired -> consume, drop the user index (the user may
-- queue again). A repeated completion returns the first result (idempotent
-- under retries); expired, revoked, left or unknown admissions are refused
-- (invariant 4), and so is an admission id of an earlier epoch ('stale', invariant 6).
-- Returns {'COMPLETED', at_ms, repeated} or {'ERROR', code}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local user, jti = ARGV[3], ARGV[4]
local seq = seq_of(cfg, jti)
if not seq then return { 'ERROR', 'stale' } end
local kind, at = ended(cfg, seq)
if kind == 'C' then return { 'COMPLETED', at, 1 } end
if kind == 'R' then return { 'ERROR', 'revoked' } end
if kind == 'E' or kind == 'N' then return { 'ERROR', 'expired' } end
if kind == 'L' then return { 'ERROR', 'not_found' } end
local e = redis.call('ZSCORE', K_ACTIVE, jti)
if not e then return { 'ERROR', 'not_found' } end
if redis.call('HGET', K_USERS, user) ~= jti then return { 'ERROR', 'owner_mismatch' } end
if not live_admission(jti, e, now) then -- lapsed, or never claimed in time (no token has it then)
  local kind = drop_admission(jti)
  redis.call('HDEL', K_USERS, user)
  keep_clock(cfg, now)
  end_entry(cfg, kind, seq, now, user, jti)
  redis.call('HINCRBY', K_STATS, 'expired', 1)
  return { 'ERROR', 'expired' }
end
drop_admission(jti)
redis.call('HDEL', K_USERS, user)
keep_clock(cfg, now)
end_entry(cfg, 'C', seq, now, user, jti)
redis.call('HINCRBY', K_STATS, 'completed', 1)
return { 'COMPLETED', now, 0 }
