-- revoke: ARGV[3] = user or "", ARGV[4] = jti or "" (at least one), ARGV[5] =
-- how long to ban the user (ms): "" for the room's session duration, "0" for
-- no ban; ARGV[6] = the ban's reason. Ends an admission early; later
-- completions with its token are refused. With a user and a ban, the user is
-- banned in the same step (ban_user): no enter can slip in between. Without
-- a ban the user may queue again (to the back). A repeated revocation returns
-- the first result. Returns {'REVOKED', at_ms, repeated, jti, banned_until_ms
-- (0: no ban)} or {'ERROR', code}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local user, jti = ARGV[3], ARGV[4]
local ban_ms = cfg.session
if ARGV[5] ~= '' then ban_ms = tonumber(ARGV[5]) end
if jti == '' then
  jti = redis.call('HGET', K_USERS, user)
  if not jti then return { 'ERROR', 'not_found' } end
end
local seq = seq_of(cfg, jti)
if not seq then return { 'ERROR', 'stale' } end -- an admission of an earlier epoch (invariant 6)
local kind, at = ended(cfg, seq)
if kind == 'R' then return { 'REVOKED', at, 1, jti, 0 } end
if kind == 'C' then return { 'ERROR', 'completed' } end
if redis.call('ZREM', K_ACTIVE, jti) == 0 then return { 'ERROR', 'not_found' } end
redis.call('ZREM', K_UNCLAIMED, jti)
if user ~= '' and redis.call('HGET', K_USERS, user) == jti then redis.call('HDEL', K_USERS, user) end
keep_clock(cfg, now)
local ends = 0
local banning = user ~= '' and ban_ms > 0
end_entry(cfg, 'R', seq, now, user ~= '' and user or nil, jti, banning and 'banned' or 'admin')
redis.call('HINCRBY', K_STATS, 'revoked', 1)
if banning then
  ends = now + ban_ms
  ban_user(cfg, user, ends, ARGV[6], now)
end
journal_flush(cfg)
return { 'REVOKED', now, 0, jti, ends }
