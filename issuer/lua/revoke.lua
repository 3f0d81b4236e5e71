-- revoke: ARGV[3] = user or "", ARGV[4] = jti or "" (at least one). Ends an
-- admission early; later completions with its token are refused. The user
-- may queue again (to the back). A repeated revocation returns the first
-- result. Returns {'REVOKED', at_ms, repeated, jti} or {'ERROR', code}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local user, jti = ARGV[3], ARGV[4]
if jti == '' then
  jti = redis.call('HGET', K_USERS, user)
  if not jti then return { 'ERROR', 'not_found' } end
end
local seq = seq_of(cfg, jti)
if not seq then return { 'ERROR', 'stale' } end -- an admission of an earlier epoch (invariant 6)
local kind, at = ended(cfg, seq)
if kind == 'R' then return { 'REVOKED', at, 1, jti } end
if kind == 'C' then return { 'ERROR', 'completed' } end
if redis.call('ZREM', K_ACTIVE, jti) == 0 then return { 'ERROR', 'not_found' } end
redis.call('ZREM', K_UNCLAIMED, jti)
if user ~= '' and redis.call('HGET', K_USERS, user) == jti then redis.call('HDEL', K_USERS, user) end
keep_clock(cfg, now)
end_entry(cfg, 'R', seq, now)
redis.call('HINCRBY', K_STATS, 'revoked', 1)
return { 'REVOKED', now, 0, jti }
