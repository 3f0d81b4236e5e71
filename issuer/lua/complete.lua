-- complete: ARGV[3], ARGV[4] = user (token sub), jti of the first admission; ARGV[5], ARGV[6]
-- those of the second, and so on (one script call per batch of concurrent completions for the
-- room, issuer/batch.go). Each pair is completed exactly as if it had run alone, in ARGV order:
-- two completions of one jti in a batch are a completion and its repeat.
-- Atomic check-and-consume, per admission: still active and not expired -> consume, drop the
-- user index (the user may queue again). A repeated completion returns the first result
-- (idempotent under retries, of one pair or of the whole call); expired, revoked, left or
-- unknown admissions are refused (invariant 4), and so is an admission id of an earlier epoch
-- ('stale', invariant 6).
-- Returns {'ERROR', code} for the whole call (unknown_room), else one reply per pair, in ARGV
-- order: {'COMPLETED', at_ms, repeated} or {'ERROR', code} (issuer/scripts.go decodeComplete).
-- Per pair: ZSCORE active first (a live admission has no ended record, as every script that
-- writes one drops the admission in the same step); only for an admission no longer active the
-- ended lookup (up to five ZSCOREs) tells a repeat from a refusal.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local completed, expired = 0, 0

local function complete(user, jti)
  local seq = seq_of(cfg, jti)
  if not seq then return { 'ERROR', 'stale' } end
  local e = redis.call('ZSCORE', K_ACTIVE, jti)
  if not e then
    local kind, at = ended(cfg, seq)
    if kind == 'C' then return { 'COMPLETED', at, 1 } end
    if kind == 'R' then return { 'ERROR', 'revoked' } end
    if kind == 'E' or kind == 'N' then return { 'ERROR', 'expired' } end
    return { 'ERROR', 'not_found' } -- left ('L'), or unknown
  end
  if redis.call('HGET', K_USERS, user) ~= jti then return { 'ERROR', 'owner_mismatch' } end
  if not live_admission(jti, e, now) then -- lapsed, or never claimed in time (no token has it then)
    local kind = drop_admission(jti)
    redis.call('HDEL', K_USERS, user)
    keep_clock(cfg, now)
    end_entry(cfg, kind, seq, now, user, jti)
    expired = expired + 1
    return { 'ERROR', 'expired' }
  end
  drop_admission(jti)
  redis.call('HDEL', K_USERS, user)
  keep_clock(cfg, now)
  end_entry(cfg, 'C', seq, now, user, jti)
  completed = completed + 1
  return { 'COMPLETED', now, 0 }
end

local out = {}
for i = 3, #ARGV - 1, 2 do out[#out + 1] = complete(ARGV[i], ARGV[i + 1]) end
-- The stats, once per call (the pairs' HINCRBYs summed; the same counts).
if completed > 0 then redis.call('HINCRBY', K_STATS, 'completed', completed) end
if expired > 0 then redis.call('HINCRBY', K_STATS, 'expired', expired) end
return out
